"""A real kernelcup with its real scheduler (APScheduler on the test's database) and a clock
that time-machine holds still: a test moves it (``clock.move_to``) and tells the scheduler to
look (``wakeup``). asyncio's own clock keeps running, so the pipeline and polls work as usual.

The runner's far end is scripted: a submission says in a comment what its re-runs measure
(``# kc-score: <seconds> <half-width of the CI>``), so final standings can be set up exactly.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from sqlalchemy.engine import Engine
from sqlmodel import func, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Limits, Settings, load_settings
from kernelcup.core.messages import Actor, Attachment, Reply, Request
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, Runner
from kernelcup.core.scheduling.announcements import Occasion
from kernelcup.core.store.db import make_engine, session_scope
from kernelcup.core.store.models import Leaderboard
from kernelcup.harness.spec import CaseResult, JobSpec, Mode, Progress, Result, Status

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ADMIN = Actor("console:root", "root")  # config: console:* are admins
ALICE = Actor("discord:1", "alice")
BOB = Actor("discord:2", "bob")
CAROL = Actor("discord:3", "carol")
SCHEDULE = {
    "reminders": ["24h", "1h"],
    "final_top_n": 3,
    "final_rounds": 2,
    "misfire_grace": "6h",
    "reminder_grace": "15m",
    "final_poll": "0.05s",
    "reconcile": "5m",
    "start_delay": "0s",
}


def kernel(score_s: float, ci_s: float = 0.0, label: str = "") -> bytes:
    """The identity solution, with what the scripted runner will measure for it."""
    source = (ROOT / "leaderboards/identity/solutions/pytorch.py").read_text()
    return f"{source}\n# kc-score: {score_s!r} {ci_s!r}\n# kc-label: {label}\n".encode()


def _marker(source: str, key: str) -> str:
    for line in source.splitlines():
        if line.startswith(f"# {key}: "):
            return line.split(": ", 1)[1]
    return ""


class ScriptedRunner:
    """Answers at once with what the submission's comment says; remembers every spec it ran."""

    name = "local"

    def __init__(self) -> None:
        self.specs: list[JobSpec] = []
        self.fail_labels: set[str] = set()  # re-runs of these fail their checks
        self.gate: asyncio.Event | None = None  # when set up, ranked runs wait for it
        self.measured: dict[str, float] = {}  # label -> the score measured from now on, whatever the code says

    def gpus(self) -> list[str]:
        return ["cpu"]

    def label(self, spec: JobSpec) -> str:
        return _marker(spec.files[spec.submission_name], "kc-label")

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        self.specs.append(spec)
        if self.gate is not None and spec.mode is Mode.RANKED:
            await self.gate.wait()
        await on_progress(Progress("benchmarking", 1, 1))
        score, ci = (float(x) for x in _marker(spec.files[spec.submission_name], "kc-score").split())
        score = self.measured.get(self.label(spec), score)
        if self.label(spec) in self.fail_labels:
            return Result(job_id=spec.job_id, mode=spec.mode, status=Status.FAILED, verdict="wrong answer")
        case = CaseResult(case={"size": 4}, passed=True, runs=100, median_ns=score * 1e9,
                          ci_low_ns=(score - ci) * 1e9, ci_high_ns=(score + ci) * 1e9)
        return Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="passed",
                      benchmarks=[case], score_s=score)

    async def cancel(self, job_id: int) -> None:
        return None


@pytest.fixture
def clock() -> Iterator[time_machine.Traveller]:
    with time_machine.travel(NOW, tick=False) as traveller:
        yield traveller


@pytest.fixture
def sqlite_engine(tmp_path: Path, sqlite_template: Path) -> Iterator[Engine]:
    path = tmp_path / "kernelcup.db"
    shutil.copyfile(sqlite_template, path)
    engine = make_engine(f"sqlite:///{path}")
    yield engine
    engine.dispose()


def settings_for(tmp_path: Path, **schedule: Any) -> Settings:
    base = load_settings(env={})
    empty = tmp_path / "no-leaderboards"
    empty.mkdir(exist_ok=True)
    return replace(
        base,
        leaderboards_dir=empty,  # nothing synced at start: each test creates its leaderboards
        announcements={"console": {"*": "terminal"}, "recording": {"*": "#results"}},
        limits=Limits(heartbeat_s=60.0),
        sections={**base.sections, "schedule": {**SCHEDULE, **schedule}},
    )


@dataclass
class Recorder:
    """An adapter's announcement end: what it was asked to post, where."""

    platform: str = "recording"
    posts: list[tuple[str, Reply]] = field(default_factory=list)

    async def announce(self, channel: str, reply: Reply) -> None:
        self.posts.append((channel, reply))


@dataclass
class Bot:
    """One bot process: the app, its runner, and what it announced."""

    app: Kernelcup
    runner: Any
    recorder: Recorder

    def occasions(self) -> list[Occasion]:
        return [a.occasion for platform, _, a in self.app.announcements.sent if platform == "recording"]

    def texts(self, occasion: Occasion) -> list[str]:
        return [a.reply.text() for platform, _, a in self.app.announcements.sent
                if platform == "recording" and a.occasion is occasion]

    async def ask(self, command: str, actor: Actor = ADMIN, files: dict[str, bytes] | None = None,
                  **args: Any) -> Reply:
        # As the bot's own terminal asks: `create` takes a folder by its path.
        return await self.app.handle(Request(actor=actor, command=command, args=dict(args),
                                             attachments=[Attachment(n, c) for n, c in (files or {}).items()],
                                             from_this_machine=True))

    async def create(self, name: str = "cup", deadline: datetime | str = NOW + timedelta(hours=2),
                     hidden: bool = False) -> int:
        when = deadline.isoformat() if isinstance(deadline, datetime) else deadline
        reply = await self.ask("create", folder=str(ROOT / "leaderboards/identity"), name=name, deadline=when,
                               gpu=["cpu"], hidden=hidden)
        assert reply.ok, reply.text()
        with session_scope(self.app.engine) as session:
            board_id = session.exec(select(Leaderboard.id).where(Leaderboard.name == name)).one()
        assert board_id is not None
        return board_id

    async def submit(self, actor: Actor, code: bytes, mode: str = "ranked", board: str = "cup") -> Reply:
        return await self.ask("submit", actor, files={"k.py": code}, mode=mode, leaderboard=board)

    async def ranked(self, actor: Actor, code: bytes, board: str = "cup") -> int:
        """A ranked submission, followed to its end."""
        reply = await self.submit(actor, code, board=board)
        assert reply.ok and reply.submission_id is not None, reply.text()
        async for _ in self.app.follow(reply.submission_id):
            pass
        return reply.submission_id

    def wakeup(self) -> None:
        assert self.app.scheduling is not None
        self.app.scheduling.wakeup()


class Bots:
    """Starts bots and stops whichever a test left running."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.running: list[Bot] = []

    async def start(self, engine: Engine, runner: Runner | None = None, **schedule: Any) -> Bot:
        runner = runner or ScriptedRunner()
        app = Kernelcup(settings_for(self.tmp_path, **schedule), engine, {"local": runner})
        recorder = Recorder()
        app.announcements.register(recorder)
        await app.start()
        bot = Bot(app, runner, recorder)
        self.running.append(bot)
        return bot

    async def stop(self, bot: Bot) -> None:
        self.running.remove(bot)
        await bot.app.stop()


@pytest.fixture
async def bots(tmp_path: Path) -> AsyncIterator[Bots]:
    started = Bots(tmp_path)
    yield started
    for bot in list(started.running):
        await started.stop(bot)


async def eventually(check: Callable[[], Any], timeout_s: float = 10.0, what: str = "") -> Any:
    """Poll (on asyncio's clock, which time-machine leaves running) until ``check()`` is truthy."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        await asyncio.sleep(0.02)


async def settle(seconds: float = 0.3) -> None:
    """Give anything that would (wrongly) still happen the time to happen."""
    await asyncio.sleep(seconds)


def board_row(engine: Engine, board_id: int) -> Leaderboard:
    with session_scope(engine) as session:
        board = session.get(Leaderboard, board_id)
        assert board is not None
        return board


def count(engine: Engine, model: Any, *where: Any) -> int:
    with session_scope(engine) as session:
        return int(session.exec(select(func.count()).select_from(model).where(*where)).one())


def scheduled_job_ids(bot: Bot) -> dict[str, datetime | None]:
    """The jobs one bot process scheduled (in its memory): id -> next run time."""
    scheduling = bot.app.scheduling
    assert scheduling is not None
    return {job.id: job.next_run_time for job in scheduling.scheduler.get_jobs()}

