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

from adapters.discord.adapter import DiscordAdapter
from core.app import Kernelcup
from core.config import Settings, load_settings
from core.db import make_engine, upgrade
from core.runner import ProgressCallback, RunContext, Runner
from harness.spec import JobSpec, Progress, Result, Status
from tests.discord.fake_discord import SUBMIT_CHANNEL, FakeDiscord, log_in, send_event

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


@pytest.fixture
def discord_section() -> dict[str, Any]:
    return {"guild_ids": [], "submission_channels": [SUBMIT_CHANNEL], "edit_interval_s": 0.3,
            "respond_within_s": 2.0}


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
async def app(settings: Settings, store: Engine, runner: Runner, clock: Clock) -> AsyncIterator[Kernelcup]:
    kernelcup = Kernelcup(settings, store, {"local": runner}, clock=clock)
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
