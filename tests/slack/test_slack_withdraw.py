"""``/leaderboard withdraw`` on Slack: a signed slash command through slack-bolt against the fake
Slack takes the user's own run out of the ranking, privately; someone else's is refused."""

from __future__ import annotations

from typing import Any

from kernelcup.core.messages import Actor, Attachment, Request, Table
from tests.slack.conftest import USER, solution
from tests.slack.fake_slack import TEAM, block_text
from tests.web.conftest import finish

OTHER = "U5"


async def _ranked(slack: Any, user: str) -> int:
    actor = Actor(f"slack:{TEAM}/{user}", user)
    reply = await slack.app.handle(Request(actor, "submit", {"mode": "ranked", "leaderboard": "identity",
                                                             "gpu": ["cpu"]}, [Attachment("k.py", solution())]))
    assert reply.submission_id is not None, reply.text()
    await finish(slack.app, reply.submission_id)
    return int(reply.submission_id)


async def _names_ranked(slack: Any) -> list[str]:
    show = await slack.app.handle(Request(Actor("console:root", "root"), "show", {"leaderboard": "identity"}))
    return [row[1] for block in show.blocks if isinstance(block, Table) for row in block.rows]


async def test_on_slack_a_user_withdraws_their_own_run_privately(start: Any) -> None:
    slack = await start()
    mine = await _ranked(slack, USER)
    assert await _names_ranked(slack) == [USER]
    await slack.command(f"withdraw {mine}", user=USER)
    await slack.settle()
    [response] = slack.fake.responses
    assert response["response_type"] == "ephemeral"
    assert f"Submission #{mine} is withdrawn" in block_text(response["blocks"])
    assert await _names_ranked(slack) == []


async def test_on_slack_another_users_run_cannot_be_withdrawn(start: Any) -> None:
    slack = await start()
    theirs = await _ranked(slack, OTHER)
    await slack.command(f"withdraw {theirs} --reason spite", user=USER)
    await slack.settle()
    [response] = slack.fake.responses
    assert "You can only withdraw your own submissions." in block_text(response["blocks"])
    assert await _names_ranked(slack) == [OTHER]
