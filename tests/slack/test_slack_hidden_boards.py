"""A hidden leaderboard on Slack is no existence oracle (SECURITY.md, *The bot's own surfaces*):
each ``/leaderboard`` subcommand (with the leaderboard's name or a near miss of it), a signed
slash command through slack-bolt against the fake Slack from a creator of other leaderboards,
answers exactly as for a leaderboard that does not exist. Each answer is read while the hidden
leaderboard (with a submission) exists and again after an admin deleted it. The API's, pages'
and core's side: ``tests/web/test_hidden_boards.py``."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelcup.adapters.slack.adapter import SlackAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Attachment, Request
from kernelcup.core.store.db import make_engine
from tests.discord.test_discord_hidden_boards import NEAR_MISS, SECRET, board_zip
from tests.slack.conftest import NOW, InstantRunner, Slack, slack_settings, solution
from tests.slack.conftest import SECRET as SIGNING_SECRET
from tests.slack.fake_slack import BOT_TOKEN, TEAM, FakeSlack
from tests.web.conftest import finish

ADMIN = Actor("console:root", "root")
CAROL = "U7"  # creates leaderboards, but not this one
ASKS = {"show": f"show {SECRET}", "task": f"task {SECRET}", "template": f"template {SECRET}",
        "mine": f"mine {SECRET}", "delete": f"delete {SECRET} --yes",
        # a near miss: the typo hint names public leaderboards only
        "show, a near miss": f"show {NEAR_MISS}", "task, a near miss": f"task {NEAR_MISS}",
        "template, a near miss": f"template {NEAR_MISS}"}


@pytest.fixture
async def slack(fake: FakeSlack, leaderboards: Path, tmp_path: Path, sqlite_template: Path) -> AsyncIterator[Slack]:
    path = tmp_path / "kernelcup.db"
    shutil.copyfile(sqlite_template, path)
    settings = slack_settings(fake, leaderboards)
    settings = replace(settings, roles={"admin": [ADMIN.identity],
                                        "creator": [ADMIN.identity, f"slack:{TEAM}/{CAROL}"]})
    app = Kernelcup(settings, make_engine(f"sqlite:///{path}"), {"local": InstantRunner()}, clock=lambda: NOW,
                    scheduler=False)
    await app.start()
    adapter = SlackAdapter(settings, {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET})
    task = asyncio.create_task(adapter.run(app))
    await asyncio.wait_for(adapter.ready.wait(), 10)
    yield Slack(adapter, app, fake, f"http://127.0.0.1:{adapter.port}/slack/events")
    await adapter.stop()
    await task
    await app.stop()
    app.engine.dispose()


async def _hidden_board_with_a_submission(app: Kernelcup) -> None:
    created = await app.handle(Request(ADMIN, "create", {"folder": "board.zip", "name": SECRET, "gpu": ["cpu"],
                                                         "deadline": "+7d", "hidden": True},
                                       [Attachment("board.zip", board_zip())]))
    assert created.ok, created.text()
    submitted = await app.handle(Request(ADMIN, "submit", {"mode": "test", "leaderboard": SECRET, "gpu": ["cpu"]},
                                         [Attachment("k.py", solution())]))
    assert submitted.submission_id is not None, submitted.text()
    await finish(app, submitted.submission_id)


async def _answer(slack: Slack, text: str) -> list[Any]:
    """What the bot told Slack to show for one command: response-URL answers, messages and files
    (not its look-ups of who the user is, which it caches)."""
    fake = slack.fake
    calls, responses = len(fake.calls), len(fake.responses)
    status, _ = await slack.command(text, user=CAROL)
    assert status == 200
    await fake.wait_for(lambda: len(fake.responses) > responses or len(fake.calls) > calls)
    await slack.settle()
    shown = [(call.method, call.params) for call in fake.calls[calls:] if call.method.startswith(("chat.", "files."))]
    return [*fake.responses[responses:], *shown]


@pytest.mark.parametrize("ask", list(ASKS))
async def test_on_slack_a_hidden_leaderboard_answers_as_a_missing_one(slack: Slack, ask: str) -> None:
    await _hidden_board_with_a_submission(slack.app)
    hidden = await _answer(slack, ASKS[ask])
    deleted = await slack.app.handle(Request(ADMIN, "delete", {"leaderboard": SECRET, "yes": True}))
    assert deleted.ok, deleted.text()
    missing = await _answer(slack, ASKS[ask])
    assert hidden == missing, f"hidden:  {hidden!r}\nmissing: {missing!r}"
