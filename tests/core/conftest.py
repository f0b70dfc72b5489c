"""A real kernelcup core on a real database, with the runner's far end swapped for one that
answers at once: commands, validation and storage are what these tests are about."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from kernelcup.core.app import Kernelcup
from kernelcup.core.config import load_settings
from kernelcup.core.messages import Actor, Attachment, Reply, Request
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.harness.spec import JobSpec, Progress, Result, Status

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


class InstantRunner:
    """Answers every job with a passing result whose score is given by the test."""

    name = "local"

    def __init__(self) -> None:
        self.score_s = 1e-3
        self.noise = 0.0  # the half-width of the score's noise range, as a share of the score
        self.specs: list[JobSpec] = []

    def gpus(self) -> list[str]:
        return ["cpu"]

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        self.specs.append(spec)
        await on_progress(Progress("testing", 1, 1))
        low, high = (self.score_s * (1 - self.noise), self.score_s * (1 + self.noise)) if self.noise else (None, None)
        return Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="all tests passed",
                      score_s=self.score_s, score_low_s=low, score_high_s=high)

    async def cancel(self, job_id: int) -> None:
        return None


@pytest.fixture
def runner() -> InstantRunner:
    return InstantRunner()


@pytest.fixture
async def app(core_engine: Engine, runner: InstantRunner) -> AsyncIterator[Kernelcup]:
    settings = replace(load_settings(env={}), leaderboards_dir=ROOT / "leaderboards")
    kernelcup = Kernelcup(settings, core_engine, {"local": runner}, clock=lambda: NOW)
    kernelcup.sync_if_empty()
    await kernelcup.pipeline.start()
    yield kernelcup
    await kernelcup.pipeline.stop()


ALICE = Actor("console:alice", "alice")
BOB = Actor("discord:42", "bob")


def request(command: str, actor: Actor = BOB, files: dict[str, bytes] | None = None, **args: object) -> Request:
    return Request(actor=actor, command=command, args=dict(args),
                   attachments=[Attachment(n, c) for n, c in (files or {}).items()])


Ask = Callable[..., "Reply"]


def solution(board: str, name: str = "pytorch.py") -> bytes:
    return (ROOT / "leaderboards" / board / "solutions" / name).read_bytes()


async def finish(app: Kernelcup, submission_id: int) -> list[str]:
    """Follow a submission to its end; the phases seen, in order."""
    return [event.phase async for event in app.follow(submission_id)]



@pytest.fixture
def core_engine(engine: Engine) -> Engine:
    """Every core test runs on SQLite and on PostgreSQL (tests/conftest.py)."""
    return engine
