"""The job rows: every database step of the pipeline, each one short transaction, each one a
conditional update, so several bot processes can share one queue and a row that moved on (cancelled
elsewhere, taken by recovery) is never overwritten. Called from worker threads."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import ColumnElement, and_, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from kernelcup.core.config import Settings
from kernelcup.core.leaderboards.ranking import RankChange, record_run
from kernelcup.core.pipeline.events import JobEvent, Phase, job_event
from kernelcup.core.pipeline.jobspec import build_spec
from kernelcup.core.store.db import as_utc, session_scope
from kernelcup.core.store.models import Job, JobStatus, Run, Submission
from kernelcup.harness.spec import JobSpec, Result, Status

log = structlog.get_logger("kernelcup.core.pipeline.jobs")

STALE_HEARTBEATS = 3  # a worker silent this many heartbeat periods is taken for dead
RUNNING, QUEUED = JobStatus.RUNNING, JobStatus.QUEUED
CANCELLED = "cancelled on request"
_UNCLAIMED = {"worker": None, "started_at": None, "heartbeat_at": None, "progress": None}


def restart_failure(restarts: int) -> str:
    times = {1: "once", 2: "twice"}.get(restarts, f"{restarts} times")
    return f"the bot restarted {times} while this job ran; it was not retried again — please resubmit"


@dataclass(frozen=True)
class Recovery:
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


@dataclass
class Claim:
    job_id: int
    submission_id: int
    gpu: str
    spec: JobSpec | None
    error: str | None = None  # why no spec could be built
    runner_ref: str | None = None  # the remote work of an earlier attempt, to re-attach to
    run: Run | None = None  # the Run to store, less the result (filled in at claim time)
    heartbeat: asyncio.Task[None] | None = None
    phase: str = Phase.COMPILING
    done: int = 0
    total: int = 0
    written_at: float = 0.0
    rank_change: RankChange | None = None  # what storing the run did to its author's rank


class JobRows:
    def __init__(self, engine: Engine, settings: Settings, worker_id: str, clock: Callable[[], datetime]) -> None:
        self.engine, self.settings, self.worker_id, self.clock = engine, settings, worker_id, clock

    def claim(self, runner: str, gpus: list[str]) -> Claim | None:
        """Mark the lane's next queued job ours (round-robin across users: by turn, then id, see
        kernelcup.core.pipeline.fairness); safe with several processes on one database."""
        now = self.clock()
        oldest = (
            select(Job.id)
            .where(Job.status == QUEUED, Job.runner == runner, col(Job.gpu).in_(gpus))
            .order_by(col(Job.turn), col(Job.id))
            .limit(1)
            .with_for_update(skip_locked=True)  # PostgreSQL; SQLite serialises writers anyway
            .scalar_subquery()
        )
        claim = (
            update(Job)
            .where(col(Job.id) == oldest, col(Job.status) == QUEUED)
            .values(
                status=RUNNING,
                worker=self.worker_id,
                attempts=col(Job.attempts) + 1,
                started_at=now,
                heartbeat_at=now,
                finished_at=None,
                progress=None,
                error=None,
            )
            .returning(Job)
        )
        with session_scope(self.engine) as session:
            job = session.execute(claim).scalars().one_or_none()
            if job is None or job.id is None:
                return None
            taken = Claim(job.id, job.submission_id, job.gpu, spec=None, runner_ref=job.runner_ref)
            # Held here, so build_spec finds it in the session instead of asking again.
            submission = session.get(Submission, job.submission_id)
            try:  # in the claim's transaction: one round trip less per job
                taken.spec = build_spec(session, job, self.settings)
            except Exception as exc:
                taken.error = f"the job could not be prepared: {exc}"
                return taken
            assert submission is not None
            taken.run = Run(
                job_id=job.id,
                submission_id=job.submission_id,
                leaderboard_id=submission.leaderboard_id,
                user_id=submission.user_id,
                gpu=job.gpu,
                mode=submission.mode,
                passed=False,
                result_json="{}",
            )
            return taken

    def ours(self, job_id: int) -> ColumnElement[bool]:
        return and_(col(Job.id) == job_id, col(Job.status) == RUNNING, col(Job.worker) == self.worker_id)

    def change(
        self,
        where: ColumnElement[bool],
        values: dict[str, Any],
        then: Callable[[Session], int | None] | None = None,
    ) -> JobEvent | None:
        """One conditional update (and ``then``, in its transaction, giving a run id): the job's
        new state as an event, or None when the row had moved on (cancelled elsewhere, taken by
        recovery)."""
        with session_scope(self.engine) as session:
            stmt = update(Job).where(where).values(**values).returning(Job)
            job = session.execute(stmt).scalars().one_or_none()
            if job is None:
                return None
            run_id = then(session) if then is not None else None
            return job_event(session, job, run_id)

    def update_running(self, job_id: int, **values: Any) -> bool:
        values["heartbeat_at"] = self.clock()
        return self.change(self.ours(job_id), values) is not None

    def finish_row(
        self, claim: Claim, status: JobStatus | None, error: str | None, result: Result | None
    ) -> JobEvent | None:
        run = claim.run
        if result is not None:
            timed_out = result.status is Status.TIMED_OUT
            status = JobStatus.TIMED_OUT if timed_out else JobStatus.SUCCEEDED
            error = result.verdict if timed_out else None

        def store_run(session: Session) -> int | None:
            if result is None or run is None:
                return None
            run.passed, run.score = result.passed, result.score_s
            run.score_low, run.score_high = result.score_low_s, result.score_high_s
            run.result_json = result.to_json()
            run.system_json = json.dumps(asdict(result.system))
            session.add(run)
            session.flush()
            claim.rank_change = record_run(session, run)  # best scores, same transaction
            return run.id

        values = {"status": status, "error": error, "finished_at": self.clock(), "progress": None}
        return self.change(self.ours(claim.job_id), values, store_run)

    def requeue_row(self, job_id: int) -> JobEvent | None:
        """A clean stop is not the job's fault: give the attempt back."""
        values = {"status": QUEUED, "attempts": col(Job.attempts) - 1, **_UNCLAIMED}
        return self.change(self.ours(job_id), values)

    def is_cancelled(self, job_id: int) -> bool:
        with session_scope(self.engine) as session:
            job = session.get(Job, job_id)
            return job is None or job.status == JobStatus.CANCELLED

    def cancel_row(self, job_id: int) -> JobEvent | None:
        where = and_(col(Job.id) == job_id, col(Job.status).in_([QUEUED, RUNNING]))
        values = {"status": JobStatus.CANCELLED, "error": CANCELLED, "finished_at": self.clock()}
        return self.change(where, values)

    def queued_events(self, submission_ids: set[int]) -> list[JobEvent]:
        with session_scope(self.engine) as session:
            jobs = session.exec(
                select(Job).where(col(Job.submission_id).in_(submission_ids), Job.status == QUEUED)
            ).all()
            return [job_event(session, job) for job in jobs]

    def recover(self, at_start: bool, running: set[int]) -> tuple[Recovery, list[JobEvent]]:
        """Jobs left running by a worker that is gone: re-queued if attempts remain, else failed.

        Gone means silent for STALE_HEARTBEATS heartbeat periods or, at start, our own worker id
        (we are its next life).
        """
        stale_before = self.clock() - timedelta(seconds=STALE_HEARTBEATS * self.settings.limits.heartbeat_s)
        recovery, events = Recovery(), []
        with session_scope(self.engine) as session:
            jobs = session.exec(select(Job).where(Job.status == RUNNING)).all()
        for job in jobs:
            assert job.id is not None
            beat = job.heartbeat_at or job.started_at or job.queued_at
            mine = at_start and job.worker == self.worker_id
            if job.id in running or not (mine or as_utc(beat) < stale_before):
                continue
            retry = job.attempts < self.settings.limits.max_attempts
            values: dict[str, Any] = (
                {"status": QUEUED, **_UNCLAIMED}
                if retry
                else {
                    "status": JobStatus.FAILED,
                    "error": restart_failure(job.attempts),
                    "finished_at": self.clock(),
                }
            )
            # Re-checked in the update: a worker that just beat, or another recovering process,
            # is never overruled.
            same_beat = (
                col(Job.heartbeat_at).is_(None)
                if job.heartbeat_at is None
                else col(Job.heartbeat_at) == job.heartbeat_at
            )
            where = and_(
                col(Job.id) == job.id,
                col(Job.status) == RUNNING,
                col(Job.worker) == job.worker,
                same_beat,
            )
            event = self.change(where, values)
            if event is None:
                continue
            events.append(event)
            (recovery.requeued if retry else recovery.failed).append(job.id)
            log.warning(
                "recovered a job left running",
                job_id=job.id,
                submission_id=job.submission_id,
                worker=job.worker,
                outcome="re-queued" if retry else "failed",
            )
        return recovery, events
