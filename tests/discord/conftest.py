"""The real Discord adapter and discord.py client against the fake Discord server, serving a
real kernelcup core on a SQLite file. Runners are the far end of the Runner protocol: the real
``LocalRunner`` where a test is about a real run, or a gated one the test controls."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import discord
import pytest
import yaml
from sqlalchemy.engine import Engine

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, Runner
from kernelcup.core.store.db import make_engine, upgrade
from kernelcup.harness.spec import JobSpec, Progress, Result, Status
from tests.discord.fake_discord import (
    APP_ID,
    PARTICIPANT,
    SUBMIT_CHANNEL,
    Call,
    FakeDiscord,
    Person,
    embeds_of,
    log_in,
    send_event,
    slash,
)

ROOT = Path(__file__).resolve().parents[2]
START = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class Clock:
    """The adapter's and the core's clock, moved by the test (the event loop's is left alone)."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


class GatedRunner:
    """Serves cpu and H100; reports progress, then holds each job until the test opens the gate."""

    name = "local"

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.gate.set()
        self.started = asyncio.Event()
        self.progress_steps = 2
        self.specs: list[JobSpec] = []

    def gpus(self) -> list[str]:
        return ["cpu", "H100"]

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        self.specs.append(spec)
        self.started.set()
        for i in range(1, self.progress_steps + 1):
            await on_progress(Progress("testing", i, self.progress_steps))
        await self.gate.wait()
        return Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="all tests passed",
                      score_s=2e-3, stdout="hello from the kernel\n")

    async def cancel(self, job_id: int) -> None:
        return None


def shrink_benchmarks(task_yml: Path) -> None:
    """A shipped leaderboard with tiny benchmarks: a ranked run on the CPU takes seconds."""
    task = yaml.safe_load(task_yml.read_text())
    task["benchmarks"] = [{"size": 1000, "seed": 4321}, {"size": 4096, "seed": 8765}]
    task_yml.write_text(yaml.safe_dump(task, sort_keys=False))


@pytest.fixture
def leaderboards(tmp_path: Path) -> Path:
    """The shipped identity leaderboard, benchmarks shrunk, in a folder of its own."""
    root = tmp_path / "leaderboards"
    shutil.copytree(ROOT / "leaderboards" / "identity", root / "identity",
                    ignore=shutil.ignore_patterns("solutions"))
    shutil.copy(ROOT / "leaderboards" / "utils.py", root / "utils.py")
    shrink_benchmarks(root / "identity" / "task.yml")
    return root


# Long enough that no command in these tests is deferred for being slow, however loaded the box.
QUICK_ENOUGH_S = 600.0


@pytest.fixture
def discord_section() -> dict[str, Any]:
    # The tests read a quick command's first answer; on a loaded CI box a 2 s budget turned some of
    # them into deferrals. Deferral itself is tested where the budget is set to nothing (test_menus).
    return {"guild_ids": [], "submission_channels": [SUBMIT_CHANNEL], "edit_interval_s": 0.3,
            "respond_within_s": QUICK_ENOUGH_S}


@pytest.fixture
def settings(leaderboards: Path, discord_section: dict[str, Any]) -> Settings:
    base = load_settings(env={})
    return replace(base, leaderboards_dir=leaderboards,
                   roles={"admin": ["discord-role:Organizers"], "creator": ["discord-role:Organizers"]},
                   announcements={"discord": {"*": str(SUBMIT_CHANNEL)}},
                   sections={**base.sections, "discord": discord_section})


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(tmp_path: Path) -> Engine:
    engine = make_engine(f"sqlite:///{tmp_path}/kernelcup.db")
    upgrade(engine)
    return engine


@pytest.fixture
def runner() -> Runner:
    return GatedRunner()


@pytest.fixture
async def app(settings: Settings, store: Engine, runner: Runner) -> AsyncIterator[Kernelcup]:
    kernelcup = Kernelcup(settings, store, {"local": runner})  # real time: only the adapter's clock moves
    await kernelcup.start()
    yield kernelcup
    await kernelcup.stop()
    store.dispose()


@pytest.fixture
async def fake(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    server = FakeDiscord()
    await server.start()
    monkeypatch.setattr(discord.http.Route, "BASE", server.api)
    yield server
    await server.close()


@pytest.fixture
async def adapter(app: Kernelcup, fake: FakeDiscord, settings: Settings, clock: Clock
                  ) -> AsyncIterator[DiscordAdapter]:
    bot = DiscordAdapter(settings, {"DISCORD_TOKEN": "fake-token"}, clock=clock)
    bot.attach(app)
    await log_in(bot.client, fake)
    yield bot
    await bot.stop()


Send = Callable[[dict[str, Any]], None]


@pytest.fixture
def send(adapter: DiscordAdapter) -> Send:
    return lambda payload: send_event(adapter.client, payload)


async def settled(adapter: DiscordAdapter) -> None:
    """Wait until every submission the adapter follows has been delivered."""
    async with asyncio.timeout(60):
        while adapter.conversations.following:
            await asyncio.gather(*adapter.conversations.following, return_exceptions=True)


SOLUTION = (ROOT / "leaderboards" / "identity" / "solutions" / "pytorch.py").read_bytes()


async def submit(fake: FakeDiscord, send: Send, *, person: Person = PARTICIPANT, **options: Any
                 ) -> tuple[dict[str, Any], int]:
    """/leaderboard submit of the identity solution; returns the payload and the public message's id."""
    options = {"mode": "test", "gpu": "cpu", **options}
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, person=person, **options)
    send(payload)
    webhook = f"/webhooks/{APP_ID}/{payload['token']}"
    public = await fake.wait_for(lambda c: c.method == "POST" and c.path == webhook and c.status == 200)
    return payload, int(public[0].response["id"])


def is_final(call: Call) -> bool:
    """The result embed: it is the one that points to the details."""
    return any(field.get("name") == "Details" for e in embeds_of(call) for field in e.get("fields", []))


async def final_edit(fake: FakeDiscord, message_id: int | None = None) -> Call:
    calls = await fake.wait_for(lambda c: c.status == 200 and is_final(c) and (
        message_id is None or c.path.endswith(f"/messages/{message_id}")), timeout=60)
    return calls[0]


def callbacks(fake: FakeDiscord, payload: dict[str, Any]) -> list[Call]:
    return fake.find("POST", f"/interactions/{payload['id']}/{payload['token']}/callback")


async def callback(fake: FakeDiscord, payload: dict[str, Any]) -> Call:
    """The interaction's response (defer, message, modal, autocomplete choices, update)."""
    path = f"/interactions/{payload['id']}/{payload['token']}/callback"
    return (await fake.wait_for(lambda c: c.path == path and c.status == 200))[0]


async def followup(fake: FakeDiscord, payload: dict[str, Any]) -> Call:
    """The first follow-up message posted with the interaction's token."""
    path = f"/webhooks/{APP_ID}/{payload['token']}"
    return (await fake.wait_for(lambda c: c.method == "POST" and c.path == path and c.status == 200))[0]


async def original_edit(fake: FakeDiscord, payload: dict[str, Any], count: int = 1) -> Call:
    path = f"/webhooks/{APP_ID}/{payload['token']}/messages/@original"
    return (await fake.wait_for(lambda c: c.method == "PATCH" and c.path == path and c.status == 200,
                                count=count))[count - 1]
