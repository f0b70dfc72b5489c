"""Seeding and fakes shared by the pipeline tests.

``FakeRunner`` is the far end of our own Runner protocol (what Modal or the local subprocess
would be); the pipeline under test is the real one, on a real database.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.config import GpuConfig, Limits, Settings
from kernelcup.core.pipeline.fairness import assign_turns
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Code, Job, Leaderboard, LeaderboardFile, Submission, User
from kernelcup.harness.spec import JobSpec, Progress, Result, Status

FAKE_HARNESS = Path(__file__).with_name("fake_harness.py")


def fake_harness(behaviour: str, *args: str) -> list[str]:
    return [sys.executable, str(FAKE_HARNESS), behaviour, *args]


def make_settings(runner: str = "fake", concurrency: int = 1, heartbeat_s: float = 0.2, **limits: Any) -> Settings:
    return Settings(
        limits=Limits(heartbeat_s=heartbeat_s, runner_grace_s=0.0, **limits),
        gpus={
            "cpu": GpuConfig("cpu", runner),
            "H100": GpuConfig("H100", runner, peak_bandwidth_gbps=3350, peak_tflops=989),
        },
        runners={runner: {"concurrency": concurrency}},
    )


TASK: dict[str, Any] = {
    "lang": "py",
    "files": [
        {"name": "submission.py", "source": "@SUBMISSION@"},
        {"name": "task.py", "source": "task.py"},
    ],
    "tests": [{"size": 8, "seed": 1}],
    "benchmarks": [{"size": 64, "seed": 2}],
}


def seed_leaderboard(engine: Engine, **task: Any) -> int:
    with session_scope(engine) as session:
        user = User(identity="console:alice", display_name="alice")
        board = Leaderboard(
            name="vectoradd",
            deadline=datetime.now(UTC) + timedelta(days=1),
            task_json=json.dumps({**TASK, **task}),
            secret_seed=987654321,
        )
        session.add_all([user, board])
        session.flush()
        assert board.id is not None
        session.add(LeaderboardFile(leaderboard_id=board.id, name="task.py", content="# task"))
        session.add(Code(sha256="c0de", content="def custom_kernel(data): return data"))
        return board.id


def submit(
    engine: Engine,
    gpus: Iterable[str] = ("cpu",),
    runner: str = "fake",
    mode: str = "test",
    count: int = 1,
    user: str = "console:alice",
) -> list[int]:
    """Queue ``count`` submissions of ``user`` (one job per GPU each, each with its turn in the
    queue as ``kernelcup.core.pipeline.submissions.submit`` gives it); their job ids, oldest first."""
    with session_scope(engine) as session:
        board = session.exec(select(Leaderboard)).first()
        person = session.exec(select(User).where(User.identity == user)).first()
        if person is None:
            person = User(identity=user, display_name=user.partition(":")[2])
            session.add(person)
            session.flush()
        assert board is not None and board.id is not None
        assert person.id is not None
        submissions = [
            Submission(
                leaderboard_id=board.id,
                user_id=person.id,
                code_sha256="c0de",
                file_name="submission.py",
                mode=mode,
            )
            for _ in range(count)
        ]
        session.add_all(submissions)
        session.flush()
        jobs = []
        for sub in submissions:
            assert sub.id is not None
            made = [Job(submission_id=sub.id, gpu=gpu, runner=runner) for gpu in gpus]
            assign_turns(session, person.id, made)
            session.add_all(made)
            session.flush()
            jobs.extend(made)
        return [job.id for job in jobs if job.id is not None]


def job(engine: Engine, job_id: int) -> Job:
    with Session(engine) as session:
        row = session.get(Job, job_id)
        assert row is not None
        return row


async def wait_for_status(engine: Engine, job_id: int, *statuses: str, timeout: float = 10.0) -> Job:
    deadline = time.monotonic() + timeout
    while True:
        row = await asyncio.to_thread(job, engine, job_id)
        if row.status in statuses:
            return row
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} is {row.status}, not {statuses}")
        await asyncio.sleep(0.02)


class FakeRunner:
    """Returns a PASSED result at once, or when ``gate`` opens; records what it saw."""

    def __init__(
        self,
        name: str = "fake",
        gate: asyncio.Event | None = None,
        progress: Iterable[Progress] = (),
        status: Status = Status.PASSED,
    ) -> None:
        self.name = name
        self.gate = gate
        self.progress = list(progress)
        self.status = status
        self.started: list[int] = []
        self.running = 0
        self.most_running = 0
        self.cancelled: list[int] = []
        self.specs: list[JobSpec] = []

    def gpus(self) -> list[str]:
        return ["cpu", "H100"]

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        self.started.append(context.job_id)
        self.specs.append(spec)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            for event in self.progress:
                await on_progress(event)
            if self.gate is not None:
                await self.gate.wait()
            else:
                await asyncio.sleep(0)
            return Result(spec.job_id, spec.mode, self.status, "verdict", score_s=0.002)
        finally:
            self.running -= 1

    async def cancel(self, job_id: int) -> None:
        self.cancelled.append(job_id)
