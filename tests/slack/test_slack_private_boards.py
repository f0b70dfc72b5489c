"""A private leaderboard on Slack: signed slash commands through slack-bolt against the fake
Slack. A non-member's every ask (and a submit) answers as for a leaderboard that does not exist;
``/leaderboard join NAME --code CODE`` lets one in, and so does a usergroup on its role list."""

from __future__ import annotations

import re
from typing import Any

from kernelcup.core.messages import Actor, Request
from tests.slack.conftest import ADMIN, USER
from tests.slack.fake_slack import TEAM, block_text

BOARD, MISSING = "identity", "no-such-cup"
ASKS = ("show {}", "task {}", "template {}", "mine {}", "join {} --code guess")


async def _private(slack: Any, *roles: str) -> str:
    args: dict[str, Any] = {"leaderboard": BOARD, "code": True, "roles": list(roles) or None}
    organizer = Actor(f"slack:{TEAM}/{ADMIN}", "root", ("slack-group:SADMINS",))  # an admin (conftest)
    reply = await slack.app.handle(Request(organizer, "private", args))
    found = re.search(r"Invite code: (\S+)", reply.text())
    assert reply.ok and found, reply.text()
    return found.group(1)


async def _said(slack: Any, text: str, user: str = USER) -> str:
    """What the bot showed for one command: its response-URL answers and its messages."""
    responses, calls = len(slack.fake.responses), len(slack.fake.calls)
    status, _ = await slack.command(text, user=user)
    assert status == 200
    await slack.settle()  # every reply sent
    shown = [*slack.fake.responses[responses:],
             *(call.params for call in slack.fake.calls[calls:] if call.method.startswith("chat."))]
    assert shown, text
    return "\n".join(block_text(r.get("blocks") or []) or str(r.get("text", "")) for r in shown)

async def test_on_slack_a_non_member_gets_a_private_board_as_a_missing_one(start: Any) -> None:
    slack = await start()
    await _private(slack)
    for ask in ASKS:
        private = (await _said(slack, ask.format(BOARD))).replace(BOARD, "NAME")
        missing = (await _said(slack, ask.format(MISSING))).replace(MISSING, "NAME")
        assert private == missing, ask
        assert "There is no leaderboard 'NAME'" in private


async def test_on_slack_the_invite_code_lets_one_in(start: Any) -> None:
    slack = await start()
    code = await _private(slack)
    assert "You joined identity" in await _said(slack, f"join {BOARD} --code {code}")
    shown = await _said(slack, f"show {BOARD}")
    assert "There is no leaderboard" not in shown and "no ranked entries yet" in shown


async def test_on_slack_a_usergroup_on_the_role_list_lets_its_members_in(start: Any) -> None:
    slack = await start()
    slack.fake.usergroups = [{"id": "SCLASS", "handle": "class-2026", "users": ["U6"]}]
    await _private(slack, "slack-group:SCLASS")
    assert "no ranked entries yet" in await _said(slack, f"show {BOARD}", user="U6")
    assert "There is no leaderboard" in await _said(slack, f"show {BOARD}", user=USER)
