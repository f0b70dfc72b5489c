"""A hidden leaderboard on Discord is no existence oracle (SECURITY.md, *The bot's own surfaces*):
each slash command (with the leaderboard's name or a near miss of it), and the leaderboard and
GPU autocomplete, driven through discord.py against the fake Discord by a creator of other
leaderboards, answers exactly as for a leaderboard that does not exist. Each answer is read
while the hidden leaderboard (with a submission) exists and again after an admin deleted it; the
two must be the same but for Discord's ids. The API's, pages' and core's side:
``tests/web/test_hidden_boards.py``."""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace
from typing import Any

import pytest

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings
from kernelcup.core.messages import Actor, Attachment, Request
from tests.discord.conftest import ROOT, SOLUTION, Send
from tests.discord.fake_discord import Call, FakeDiscord, Person, slash
from tests.web.conftest import finish

SECRET = "secret-cup"
NEAR_MISS = "secret-cu"
ADMIN = Actor("console:root", "root")
CAROL = Person(500000000000000043, "carol")  # creates leaderboards, but not this one
ASKS: dict[str, tuple[str, dict[str, Any]]] = {  # what is asked: the command and its options
    "show": ("show", {"leaderboard": SECRET}),
    "task": ("task", {"leaderboard": SECRET}),
    "template": ("template", {"leaderboard": SECRET}),
    "mine": ("mine", {"leaderboard": SECRET}),
    "delete": ("delete", {"leaderboard": SECRET, "yes": True}),
    "show, a near miss": ("show", {"leaderboard": NEAR_MISS}),  # the typo hint names public ones only
    "task, a near miss": ("task", {"leaderboard": NEAR_MISS}),
    "template, a near miss": ("template", {"leaderboard": NEAR_MISS}),
    "autocomplete leaderboard": ("show", {"leaderboard": "sec", "focused": "leaderboard"}),
    "autocomplete gpu": ("show", {"leaderboard": SECRET, "gpu": "", "focused": "gpu"}),
}
VOLATILE = {"id", "custom_id", "timestamp", "message_id", "application_id", "channel_id", "webhook_id"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return replace(settings, roles={"admin": [ADMIN.identity],
                                    "creator": [ADMIN.identity, f"discord:{CAROL.user_id}"]})


def board_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in (ROOT / "leaderboards" / "identity").iterdir():
            if path.is_file():
                bundle.write(path, f"board/{path.name}")
        bundle.write(ROOT / "leaderboards" / "utils.py", "board/utils.py")
    return buffer.getvalue()


async def _hidden_board_with_a_submission(app: Kernelcup) -> None:
    created = await app.handle(Request(ADMIN, "create", {"folder": "board.zip", "name": SECRET, "gpu": ["cpu"],
                                                         "deadline": "+7d", "hidden": True},
                                       [Attachment("board.zip", board_zip())]))
    assert created.ok, created.text()
    submitted = await app.handle(Request(ADMIN, "submit", {"mode": "test", "leaderboard": SECRET, "gpu": ["cpu"]},
                                         [Attachment("k.py", SOLUTION)]))
    assert submitted.submission_id is not None, submitted.text()
    await finish(app, submitted.submission_id)


def _stable(value: Any) -> Any:
    """A request's JSON without the ids Discord or the bot make up for each message."""
    if isinstance(value, dict):
        return {key: _stable(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [_stable(item) for item in value]
    return value


async def _answer(fake: FakeDiscord, send: Send, ask: str) -> list[Any]:
    """Everything the bot sent Discord for one interaction: its callback and, where it deferred,
    the answer that replaced the deferral."""
    command, options = ASKS[ask]
    payload = slash(fake, "leaderboard", command, person=CAROL, **options)
    send(payload)
    token = payload["token"]

    def answered(call: Call) -> bool:
        deferred = call.path.endswith("/callback") and (call.json or {}).get("type") == 5
        return token in call.path and call.status == 200 and not deferred

    await fake.wait_for(answered)
    return [(call.method, call.path.replace(token, "TOKEN").replace(payload["id"], "ID"), _stable(call.json),
             sorted(call.files)) for call in fake.calls if token in call.path]


@pytest.mark.parametrize("ask", list(ASKS))
async def test_on_discord_a_hidden_leaderboard_answers_as_a_missing_one(
    app: Kernelcup, adapter: DiscordAdapter, fake: FakeDiscord, send: Send, ask: str
) -> None:
    await _hidden_board_with_a_submission(app)
    hidden = await _answer(fake, send, ask)
    deleted = await app.handle(Request(ADMIN, "delete", {"leaderboard": SECRET, "yes": True}))
    assert deleted.ok, deleted.text()
    missing = await _answer(fake, send, ask)
    assert hidden == missing, f"hidden:  {hidden!r}\nmissing: {missing!r}"
