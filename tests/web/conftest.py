"""The web adapter on a real kernelcup: a real SQLite file, the shipped leaderboards, and a
runner whose far end answers from a script, so the HTTP layer is what these tests are about.

``client`` drives the real ASGI app through httpx; ``ServerThread`` serves it with uvicorn on
127.0.0.1 (a free port) for the remote CLI and the browser.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import Engine

from kernelcup.adapters.web.adapter import WebAdapter
from kernelcup.adapters.web.app import create_app
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.core.access.tokens import issue_token
from kernelcup.core.access.users import user_for
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.messages import Actor
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.core.store.db import make_engine, session_scope, upgrade
from kernelcup.harness import scoring
from kernelcup.harness.spec import CaseResult, JobSpec, Mode, Progress, Result, Status, SystemInfo

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ALICE = Actor("web:alice", "alice")
BOB = Actor("discord:42", "bob")
ADMIN = Actor("web:root", "root")
SCORE = re.compile(r"#\s*score:\s*(\S+)")


class Clock:
    """The core's injectable clock, movable by a test (past a deadline, say)."""

    def __init__(self, now: datetime = NOW) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class ScriptedRunner:
    """The far end of the Runner protocol, answering from the submitted code itself: a
    ``# score: 0.002`` line sets the score, ``WRONG`` fails the tests. With ``gate`` set, every
    job waits after its tests until the test opens it (a submission caught running)."""

    name = "local"

    def __init__(self, gpus: tuple[str, ...] = ("cpu", "H100")) -> None:
        self._gpus = gpus
        self.gate: threading.Event | None = None
        self.waiting = threading.Event()  # set when a job waits at the gate
        self.specs: list[JobSpec] = []

    def gpus(self) -> list[str]:
        return list(self._gpus)

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        self.specs.append(spec)
        code = spec.files[spec.submission_name]
        match = SCORE.search(code)
        score = float(match.group(1)) if match else 1e-3
        wrong = "WRONG" in code
        await on_progress(Progress("compiling"))
        cases = spec.task.tests
        for i in range(1, len(cases) + 1):
            await on_progress(Progress("testing", i, len(cases)))
        while self.gate is not None and not self.gate.is_set():
            self.waiting.set()
            await asyncio.sleep(0.05)
        tests = [CaseResult(case=c, passed=not wrong, message="mismatch at index 3" if wrong else "") for c in cases]
        timed = spec.mode in (Mode.BENCHMARK, Mode.RANKED) and not wrong
        benchmarks = [
            CaseResult(case=c, passed=True, runs=100, median_ns=score * 1e9, min_ns=score * 0.9e9,
                       ci_low_ns=score * 0.95e9, ci_high_ns=score * 1.05e9, gbps=2.0 / score,
                       percent_of_peak=min(99.0, 0.05 / score),
                       round_median_ns=[score * 0.99e9, score * 1.01e9] if spec.mode is Mode.RANKED else [])
            for c in (spec.task.benchmarks if timed else [])
        ]
        low, high = scoring.noise_range(spec.task.ranking_by, benchmarks) if timed else (None, None)
        return Result(
            job_id=spec.job_id, mode=spec.mode, status=Status.FAILED if wrong else Status.PASSED,
            verdict="a test failed" if wrong else "all tests passed", tests=tests, benchmarks=benchmarks,
            score_s=score if timed else None, score_low_s=low, score_high_s=high, stdout="printed by the kernel\n",
            system=SystemInfo(device="cpu", gpu=context.gpu, torch="2.13.0", hostname="runner-host-7"),
        )

    async def cancel(self, job_id: int) -> None:
        return None


def web_settings_of(settings: Settings, **web: Any) -> Settings:
    return replace(settings, sections={**settings.sections, "web": {**settings.sections.get("web", {}), **web}})


def make_settings(**web: Any) -> Settings:
    settings = replace(load_settings(env={}), leaderboards_dir=ROOT / "leaderboards",
                       roles={"admin": [ADMIN.identity], "creator": []})
    return web_settings_of(settings, **web)


def build_app(engine: Engine, runner: ScriptedRunner, clock: Clock, settings: Settings | None = None) -> Kernelcup:
    app = Kernelcup(settings or make_settings(), engine, {"local": runner}, clock=clock, scheduler=False)
    app.sync_if_empty()
    return app


def token_for(app: Kernelcup, actor: Actor) -> str:
    with session_scope(app.engine) as session:
        return issue_token(session, user_for(session, actor), label="test", now=NOW)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def solution(board: str = "identity", name: str = "pytorch.py") -> bytes:
    return (ROOT / "leaderboards" / board / "solutions" / name).read_bytes()


@pytest.fixture
def db_engine(tmp_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{tmp_path}/kernelcup.db")
    upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def runner() -> ScriptedRunner:
    return ScriptedRunner()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def kc(db_engine: Engine, runner: ScriptedRunner, clock: Clock) -> AsyncIterator[Kernelcup]:
    app = build_app(db_engine, runner, clock)
    await app.pipeline.start()
    yield app
    await app.pipeline.stop()


@pytest.fixture
async def client(kc: Kernelcup) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app(kc, WebSettings.load(kc.settings)))
    async with httpx.AsyncClient(transport=transport, base_url="http://kernelcup.test") as http:
        yield http


@dataclass
class Tokens:
    alice: str
    bob: str
    admin: str


@pytest.fixture
def tokens(kc: Kernelcup) -> Tokens:
    return Tokens(token_for(kc, ALICE), token_for(kc, BOB), token_for(kc, ADMIN))


async def submit(http: httpx.AsyncClient, token: str, code: bytes, *, mode: str = "test", board: str = "identity",
                 gpus: tuple[str, ...] = ("cpu",), name: str = "kernel.py") -> httpx.Response:
    data: dict[str, Any] = {"mode": mode, "leaderboard": board, "gpu": list(gpus)}
    return await http.post("/api/submissions", headers=bearer(token), data=data,
                           files={"file": (name, code, "text/x-python")})


async def finish(app: Kernelcup, submission_id: int) -> None:
    async for _ in app.follow(submission_id):
        pass


class ServerThread:
    """kernelcup with its web adapter on a real uvicorn, in a thread with its own event loop."""

    def __init__(self, make: Callable[[], Kernelcup]) -> None:
        self._make = make
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self.url = ""
        self.app: Kernelcup | None = None
        self.adapter: WebAdapter | None = None
        self.error: BaseException | None = None

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(30) or not self.url:
            raise RuntimeError(f"the web server did not start: {self.error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(20)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        try:
            app = self.app = self._make()
            await app.pipeline.start()
            adapter = self.adapter = WebAdapter(web_settings_of(app.settings, port=0), {})  # a free port
            serving = asyncio.create_task(adapter.run(app))
            await asyncio.wait_for(adapter.ready.wait(), 20)
            self.url = f"http://127.0.0.1:{adapter.port}"
            self._ready.set()
            await self._stop.wait()
            await adapter.stop()
            await serving
            await app.pipeline.stop()
        except BaseException as exc:  # surfaced by __enter__
            self.error = exc
            self._ready.set()
            raise
