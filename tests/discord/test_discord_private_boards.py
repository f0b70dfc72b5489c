"""A private leaderboard on Discord, through discord.py against the fake Discord: a member without
the listed role gets its commands answered as for a leaderboard that does not exist (the same
requests to Discord but for its ids and the name); a member holding a role on its list is in."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings
from kernelcup.core.messages import Actor, Request
from tests.discord.conftest import Send
from tests.discord.fake_discord import ORGANIZER_PERSON, PARTICIPANT, Call, FakeDiscord, Person, slash
from tests.discord.test_discord_hidden_boards import _stable

ROOT_ACTOR = Actor("console:root", "root")
BOARD, MISSING = "identity", "no-such-cup"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Organizers are no admins here: their role is only a role on the board's list."""
    return replace(settings, roles={"admin": [ROOT_ACTOR.identity], "creator": []})


async def _private_for_organizers(app: Kernelcup) -> None:
    reply = await app.handle(Request(ROOT_ACTOR, "private", {"leaderboard": BOARD, "code": True,
                                                              "roles": ["discord-role:Organizers"]}))
    assert reply.ok, reply.text()


async def _answer(fake: FakeDiscord, send: Send, person: Person, command: str, **options: Any) -> list[Any]:
    payload = slash(fake, "leaderboard", command, person=person, **options)
    send(payload)
    token = payload["token"]

    def answered(call: Call) -> bool:
        deferred = call.path.endswith("/callback") and (call.json or {}).get("type") == 5
        return token in call.path and call.status == 200 and not deferred

    await fake.wait_for(answered)
    return [(call.method, call.path.replace(token, "TOKEN").replace(payload["id"], "ID"), _stable(call.json))
            for call in fake.calls if token in call.path]


@pytest.mark.parametrize("command", ["show", "task", "template", "mine"])
async def test_on_discord_a_non_member_gets_a_private_board_as_a_missing_one(
    app: Kernelcup, adapter: DiscordAdapter, fake: FakeDiscord, send: Send, command: str
) -> None:
    await _private_for_organizers(app)
    private = await _answer(fake, send, PARTICIPANT, command, leaderboard=BOARD)
    missing = await _answer(fake, send, PARTICIPANT, command, leaderboard=MISSING)
    assert repr(private).replace(BOARD, "NAME") == repr(missing).replace(MISSING, "NAME")
    assert "There is no leaderboard" in repr(private)


async def test_on_discord_a_holder_of_a_listed_role_sees_the_private_board(
    app: Kernelcup, adapter: DiscordAdapter, fake: FakeDiscord, send: Send
) -> None:
    await _private_for_organizers(app)
    shown = repr(await _answer(fake, send, ORGANIZER_PERSON, "show", leaderboard=BOARD))
    assert "There is no leaderboard" not in shown and "no ranked entries yet" in shown
