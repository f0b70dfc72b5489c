"""A restart of the bot does not lose the chat side of a submission: once connected again, the
adapter follows the submissions whose report it owes in their original message, and each report
is delivered once, however many processes start. Every start here is a new core and a new
adapter (what a new process would have) serving HTTP mode on the same database, SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from kernelcup.adapters.slack.adapter import SlackAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Attachment, Request
from kernelcup.core.pipeline.delivery import RESUMED_NOTE
from kernelcup.core.store.db import make_engine, session_scope
from kernelcup.core.store.models import Submission
from tests.slack.conftest import (
    CHANNEL,
    DM,
    NOW,
    SECRET,
    GatedRunner,
    InstantRunner,
    Slack,
    file_message,
    posts_in,
    slack_settings,
    solution,
)
from tests.slack.fake_slack import BOT_TOKEN, TEAM, FakeSlack, block_text

VERDICT = "✅ all tests passed"  # in the report, never in a progress line


class Bots:
    """Bot processes started and stopped by the test; whatever still runs is stopped at the end."""

    def __init__(self, fake: FakeSlack, leaderboards: Path, database_url: str) -> None:
        self.fake, self.database_url = fake, database_url
        self.settings = slack_settings(fake, leaderboards)
        self.started = 0
        self.adapters: dict[SlackAdapter, asyncio.Task[None]] = {}
        self.apps: list[Kernelcup] = []

    async def start(self, runner: Any) -> Slack:
        app = Kernelcup(self.settings, make_engine(self.database_url), {"local": runner}, clock=lambda: NOW,
                        scheduler=False)
        # A process of its own has a worker id of its own; these would share this process's, and
        # each would take the others' running jobs for its own left over from a previous life.
        app.pipeline.worker_id = app.pipeline.rows.worker_id = f"bot-{self.started}"
        self.started += 1
        await app.start()
        self.apps.append(app)
        adapter = SlackAdapter(self.settings, {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET})
        self.adapters[adapter] = asyncio.create_task(adapter.run(app))
        await asyncio.wait_for(adapter.ready.wait(), 10)
        return Slack(adapter, app, self.fake, f"http://127.0.0.1:{adapter.port}/slack/events")

    async def stop_adapter(self, slack: Slack) -> None:
        task = self.adapters.pop(slack.adapter, None)
        if task is not None:
            await slack.adapter.stop()
            await task

    async def stop_app(self, app: Kernelcup) -> None:
        if app in self.apps:
            self.apps.remove(app)
            await app.stop(drain_s=0)  # a running job goes back to the queue at once
            app.engine.dispose()

    async def stop(self, slack: Slack) -> None:
        await self.stop_adapter(slack)
        await self.stop_app(slack.app)

    async def stop_all(self) -> None:
        for adapter, task in list(self.adapters.items()):
            await adapter.stop()
            await task
        self.adapters.clear()
        for app in list(self.apps):
            await self.stop_app(app)


@pytest.fixture
async def bots(fake: FakeSlack, leaderboards: Path, database_url: str) -> AsyncIterator[Bots]:
    started = Bots(fake, leaderboards, database_url)
    yield started
    await started.stop_all()


def gated() -> GatedRunner:
    """Holds its job after one progress event, the first of its phase, which is also written to
    the job's row: a follower that subscribes late still sees it at once."""
    return GatedRunner(steps=1)


def text_of(fake: FakeSlack, channel: str, ts: str) -> str:
    return block_text(fake.messages[(channel, ts)]["blocks"])


def sent_text(params: dict[str, Any]) -> str:
    """The text of the blocks a call sent (as JSON text in a form body, or a list in JSON)."""
    blocks = params.get("blocks") or []
    return block_text(json.loads(blocks) if isinstance(blocks, str) else blocks)


def updates_of(fake: FakeSlack, channel: str, ts: str) -> list[str]:
    """The texts of every chat.update of that message, in order."""
    return [sent_text(c.params) for c in fake.calls_to("chat.update")
            if c.params.get("channel") == channel and c.params.get("ts") == ts]


def message_in(fake: FakeSlack, channel: str) -> str:
    """The ts of the one message the bot has in ``channel``."""
    [ts] = [ts for where, ts in fake.messages if where == channel]
    return ts


async def submitted_in_dm(slack: Slack) -> str:
    """A kernel shared in the DM with the bot; the ts of the live message, once it shows the run."""
    await slack.event(file_message("submit test identity", slack.fake.host_file("k.py", solution())))
    await slack.fake.wait_for(lambda: posts_in(slack.fake, DM))
    ts = message_in(slack.fake, DM)
    await slack.fake.wait_for(lambda: "testing" in text_of(slack.fake, DM, ts))
    return ts


def the_submission(engine: Engine) -> Submission:
    with session_scope(engine) as session:
        return session.exec(select(Submission).order_by(col(Submission.id))).one()


async def followed_to_the_end(app: Kernelcup) -> None:
    submission_id = the_submission(app.engine).id
    assert submission_id is not None
    async for _ in app.follow(submission_id):
        pass


async def test_a_submission_running_across_a_restart_ends_in_its_original_message(
        bots: Bots, fake: FakeSlack) -> None:
    first = await bots.start(gated())
    ts = await submitted_in_dm(first)
    assert the_submission(first.app.engine).reply_to == f"slack:{TEAM}/{DM}/{ts}"
    await bots.stop(first)  # the bot goes down mid-run; the job goes back to the queue

    runner = gated()
    second = await bots.start(runner)
    await fake.wait_for(lambda: RESUMED_NOTE in text_of(fake, DM, ts))
    runner.gate.set()
    await fake.wait_for(lambda: VERDICT in text_of(fake, DM, ts))
    await second.settle()

    assert len(posts_in(fake, DM)) == 1  # the original message, edited: no second one
    assert VERDICT in updates_of(fake, DM, ts)[-1]
    assert the_submission(second.app.engine).delivered_at is not None


async def test_a_report_finished_during_downtime_is_delivered_once_across_two_starts(
        bots: Bots, fake: FakeSlack) -> None:
    runner = gated()
    first = await bots.start(runner)
    ts = await submitted_in_dm(first)
    await bots.stop_adapter(first)  # only the Slack side goes down; the core finishes the job
    runner.gate.set()
    await followed_to_the_end(first.app)
    await bots.stop_app(first.app)
    assert VERDICT not in text_of(fake, DM, ts)

    second = await bots.start(InstantRunner())
    await second.settle()
    await bots.stop(second)
    assert VERDICT in text_of(fake, DM, ts)
    calls = len(fake.calls)

    third = await bots.start(InstantRunner())
    await third.settle()
    assert [c.method for c in fake.calls[calls:]] == []  # nothing owed, nothing said
    assert len([text for text in updates_of(fake, DM, ts) if VERDICT in text]) == 1


async def test_two_processes_following_one_submission_deliver_its_report_once(
        bots: Bots, fake: FakeSlack) -> None:
    runner = gated()
    first = await bots.start(runner)
    ts = await submitted_in_dm(first)
    await bots.stop_adapter(first)  # its core goes on running the job

    one, two = await bots.start(InstantRunner()), await bots.start(InstantRunner())
    await fake.wait_for(lambda: len([t for t in updates_of(fake, DM, ts) if RESUMED_NOTE in t]) >= 2)
    runner.gate.set()
    await fake.wait_for(lambda: VERDICT in text_of(fake, DM, ts))
    await one.settle()
    await two.settle()

    updates = updates_of(fake, DM, ts)
    assert len([text for text in updates if VERDICT in text]) == 1
    assert VERDICT in updates[-1]  # no late progress of the other process covers the report
    assert len(posts_in(fake, DM)) == 1


async def test_a_submission_whose_message_was_never_posted_gets_a_new_one_in_its_channel(
        bots: Bots, fake: FakeSlack) -> None:
    slack = await bots.start(gated())
    # The bot stopped between accepting the submission and posting its message.
    reply = await slack.app.handle(Request(Actor(f"slack:{TEAM}/U2", "u2"), "submit",
                                           {"mode": "test", "leaderboard": "identity", "gpu": ["cpu"]},
                                           [Attachment("k.py", solution())], reply_to=f"slack:{TEAM}/{CHANNEL}"))
    assert reply.submission_id is not None, reply.text()
    await bots.stop_adapter(slack)

    later = await bots.start(InstantRunner())
    [post] = await fake.wait_for(lambda: posts_in(fake, CHANNEL))
    ts = message_in(fake, CHANNEL)
    await bots.stop_app(slack.app)  # its job goes back to the queue, for the new process to run
    await fake.wait_for(lambda: VERDICT in text_of(fake, CHANNEL, ts))
    await later.settle()

    assert RESUMED_NOTE in sent_text(post.params)
    assert the_submission(later.app.engine).reply_to == f"slack:{TEAM}/{CHANNEL}/{ts}"


async def test_a_report_sent_while_a_progress_check_waits_is_sent_once(fake: FakeSlack) -> None:
    """finish() during the pump's still-owed check (a database read): the progress goes out, then
    the report, once."""
    from slack_sdk.web.async_client import AsyncWebClient

    from kernelcup.adapters.slack.blocks import SlackMessage
    from kernelcup.adapters.slack.live import LiveMessage

    client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_url)
    posted = await client.chat_postMessage(channel=DM, text="queued")
    checking, answer = asyncio.Event(), asyncio.Event()

    async def still_owed() -> bool:
        checking.set()
        await answer.wait()
        return True

    live = LiveMessage(client, str(posted["channel"]), str(posted["ts"]), 0.05, still_owed=still_owed)
    live.show(SlackMessage("progress", [{"type": "section", "text": {"type": "mrkdwn", "text": "progress"}}]))
    await checking.wait()
    finishing = asyncio.create_task(
        live.finish(SlackMessage(VERDICT, [{"type": "section", "text": {"type": "mrkdwn", "text": VERDICT}}])))
    await asyncio.sleep(0.05)
    answer.set()
    await finishing
    await live.close()
    updates = updates_of(fake, str(posted["channel"]), str(posted["ts"]))
    assert updates == ["progress", VERDICT]
