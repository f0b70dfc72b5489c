"""A restart of the bot does not lose the chat side of a submission: when the client is ready
again, the submissions whose report is owed are followed again in their original message, and
each report is delivered once, however many processes start. Every bot here is a new core and a
new adapter (what a new process would have) on the same database, SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.adapters.discord.render import GREEN
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings
from kernelcup.core.messages import Actor, Attachment, Request
from kernelcup.core.pipeline.delivery import RESUMED_NOTE
from kernelcup.core.store.db import make_engine, session_scope
from kernelcup.core.store.models import Submission
from tests.discord.conftest import SOLUTION, Clock, GatedRunner, final_edit, is_final, settled, submit
from tests.discord.fake_discord import (
    ALICE,
    GUILD_ID,
    SUBMIT_CHANNEL,
    FakeDiscord,
    description_of,
    embeds_of,
    log_in,
    send_event,
)


class Bots:
    """Bot processes started and stopped by the test; whatever still runs is stopped at the end."""

    def __init__(self, settings: Settings, database_url: str, fake: FakeDiscord, clock: Clock) -> None:
        self.settings, self.database_url, self.fake, self.clock = settings, database_url, fake, clock
        self.apps: list[Kernelcup] = []  # running
        self.started: list[Kernelcup] = []
        self.adapters: list[DiscordAdapter] = []

    async def start(self, runner: GatedRunner) -> tuple[Kernelcup, DiscordAdapter]:
        app = Kernelcup(self.settings, make_engine(self.database_url), {"local": runner}, scheduler=False)
        # A process of its own has a worker id of its own; these would share this process's, and
        # each would take the others' running jobs for its own left over from a previous life.
        app.pipeline.worker_id = app.pipeline.rows.worker_id = f"bot-{len(self.started)}"
        self.started.append(app)
        await app.start()
        self.apps.append(app)
        bot = DiscordAdapter(self.settings, {"DISCORD_TOKEN": "fake-token"}, clock=self.clock)
        bot.attach(app)
        await log_in(bot.client, self.fake)
        self.adapters.append(bot)
        return app, bot

    async def stop_adapter(self, bot: DiscordAdapter) -> None:
        if bot in self.adapters:
            self.adapters.remove(bot)
            await bot.stop()

    async def stop_app(self, app: Kernelcup) -> None:
        if app in self.apps:
            self.apps.remove(app)
            await app.stop(drain_s=0)  # a running job goes back to the queue at once
            app.engine.dispose()

    async def stop(self, app: Kernelcup, bot: DiscordAdapter) -> None:
        await self.stop_adapter(bot)
        await self.stop_app(app)

    async def stop_all(self) -> None:
        for bot in list(self.adapters):
            await self.stop_adapter(bot)
        for app in list(self.apps):
            await self.stop_app(app)


@pytest.fixture
async def bots(settings: Settings, database_url: str, fake: FakeDiscord, clock: Clock) -> AsyncIterator[Bots]:
    started = Bots(settings, database_url, fake, clock)
    yield started
    await started.stop_all()


def connect(bot: DiscordAdapter) -> None:
    """The gateway's READY, as discord.py announces it once connected and the guilds are cached."""
    bot.client.dispatch("ready")


def sender(bot: DiscordAdapter) -> Any:
    return lambda payload: send_event(bot.client, payload)


def gated() -> GatedRunner:
    """Holds its job until the gate opens, after one progress event: the first of a phase is
    also written to the job's row, so a follower that subscribes late still sees it at once."""
    runner = GatedRunner()
    runner.gate.clear()
    runner.progress_steps = 1
    return runner


async def running(fake: FakeDiscord, message_id: int) -> None:
    """Until the message shows the job's last progress (the runner then waits): a stop now cuts
    the follow short in the middle of the run, not as an event arrives."""
    await fake.wait_for(lambda c: c.method == "PATCH" and c.path.endswith(f"/messages/{message_id}")
                        and "testing 1/1" in description_of(c))


def the_submission(engine: Engine) -> Submission:
    with session_scope(engine) as session:
        return session.exec(select(Submission).order_by(col(Submission.id))).one()


async def test_a_submission_running_across_a_restart_ends_in_its_original_message(
        bots: Bots, fake: FakeDiscord) -> None:
    first = gated()
    app, bot = await bots.start(first)
    _, message_id = await submit(fake, sender(bot))
    await running(fake, message_id)
    assert the_submission(app.engine).reply_to == f"discord:{GUILD_ID}/{SUBMIT_CHANNEL}/{message_id}"
    await bots.stop(app, bot)  # the bot goes down mid-run; the job goes back to the queue

    second = gated()
    app, bot = await bots.start(second)
    connect(bot)
    message = f"/channels/{SUBMIT_CHANNEL}/messages/{message_id}"
    await fake.wait_for(lambda c: c.method == "PATCH" and c.path == message and RESUMED_NOTE in description_of(c))
    second.gate.set()
    final = await final_edit(fake, message_id)
    await settled(bot)

    assert final.path == message  # the bot token: the interaction's token died with the first process
    assert embeds_of(final)[0]["color"] == GREEN and "all tests passed" in description_of(final)
    assert not fake.find("POST", f"/channels/{SUBMIT_CHANNEL}/messages")  # no second message
    assert fake.threads and (next(iter(fake.threads)), ALICE) in fake.thread_members  # details, as live
    assert the_submission(app.engine).delivered_at is not None


async def test_a_report_finished_during_downtime_is_delivered_once_across_two_starts(
        bots: Bots, fake: FakeDiscord) -> None:
    runner = gated()
    app, bot = await bots.start(runner)
    _, message_id = await submit(fake, sender(bot))
    await running(fake, message_id)
    await bots.stop_adapter(bot)  # only the Discord side goes down; the core finishes the job
    runner.gate.set()
    submission_id = the_submission(app.engine).id
    assert submission_id is not None
    async for _ in app.follow(submission_id):
        pass
    await bots.stop_app(app)
    assert not [c for c in fake.calls if is_final(c)]

    app, bot = await bots.start(GatedRunner())
    assert await bot.resume() == 1
    final = await final_edit(fake, message_id)
    await settled(bot)
    await bots.stop(app, bot)
    assert final.path == f"/channels/{SUBMIT_CHANNEL}/messages/{message_id}"

    app, bot = await bots.start(GatedRunner())
    assert await bot.resume() == 0
    await settled(bot)
    assert len([c for c in fake.calls if is_final(c)]) == 1


async def test_two_processes_following_one_submission_deliver_its_report_once(
        bots: Bots, fake: FakeDiscord) -> None:
    runner = gated()
    _, bot = await bots.start(runner)
    _, message_id = await submit(fake, sender(bot))
    await running(fake, message_id)
    await bots.stop_adapter(bot)  # its core goes on running the job

    (_, one), (_, two) = await bots.start(GatedRunner()), await bots.start(GatedRunner())
    assert list(await asyncio.gather(one.resume(), two.resume())) == [1, 1]
    runner.gate.set()
    final = await final_edit(fake, message_id)
    await settled(one)
    await settled(two)

    assert len([c for c in fake.calls if is_final(c)]) == 1
    assert len(fake.threads) == 1
    edits = [c for c in fake.calls if c.method == "PATCH" and c.path.endswith(f"/messages/{message_id}")]
    assert edits[-1] is final  # no late progress edit of the other process covers the report


async def test_a_submission_whose_message_was_never_posted_gets_a_new_one_in_its_channel(
        bots: Bots, fake: FakeDiscord) -> None:
    runner = GatedRunner()
    app, bot = await bots.start(runner)
    # The bot stopped between accepting the submission and posting its message.
    reply = await app.handle(Request(Actor(f"discord:{ALICE}", "alice"), "submit", {"mode": "test", "gpu": ["cpu"]},
                                     [Attachment("kernel.py", SOLUTION)],
                                     reply_to=f"discord:{GUILD_ID}/{SUBMIT_CHANNEL}"))
    assert reply.submission_id is not None, reply.text()

    connect(bot)
    final = await final_edit(fake)
    await settled(bot)

    posted = fake.find("POST", f"/channels/{SUBMIT_CHANNEL}/messages")[0]
    assert f"<@{ALICE}>" in (posted.json or {}).get("content", "")
    message_id = int(posted.response["id"])
    assert final.path == f"/channels/{SUBMIT_CHANNEL}/messages/{message_id}"
    assert the_submission(app.engine).reply_to == f"discord:{GUILD_ID}/{SUBMIT_CHANNEL}/{message_id}"
