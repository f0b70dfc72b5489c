"""The job pipeline: workers that take queued jobs, run them on their runner and store results.

Jobs live in the database, so several bot processes can share one queue (PostgreSQL) and a
process that dies loses nothing: on start, and every heartbeat period after, jobs left running
by a dead worker are re-queued once or failed with a message the user can act on. All database
work runs in threads, so the event loop keeps serving chat while a worker writes.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import structlog
from sqlalchemy import ColumnElement, and_, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from core.config import Settings
from core.db import as_utc, session_scope
from core.events import EventBus, JobEvent, Phase, follow, job_event, progress_text
from core.jobspec import build_spec
from core.models import Job, JobStatus, Run, Submission, utcnow
from core.ranking import RankChange, record_run
from core.runner import RunContext, Runner, RunnerError
from core.switches import set_submissions_paused, submissions_paused
from core.timeouts import runner_limit
from harness.spec import JobSpec, Progress, Result, Status

# Told after a ranked run's commit changed its author's rank (e.g. to announce a new #1).
RankListener = Callable[[Run, RankChange], Awaitable[None]]

log = structlog.get_logger(__name__)

STALE_HEARTBEATS = 3  # a worker silent this many heartbeat periods is taken for dead
PROGRESS_WRITE_S = 0.5  # at most this often a progress event is written to the job's row
LAST_RESORT_SLACK_S = 5.0  # runners enforce their own limit; this catches one that hangs
RUNNING, QUEUED = JobStatus.RUNNING, JobStatus.QUEUED
CANCELLED = "cancelled on request"
_UNCLAIMED = {"worker": None, "started_at": None, "heartbeat_at": None, "progress": None}


def is_paused(session: Session) -> bool:
    """Workers keep running what is queued; the submission service refuses new submissions."""
    return submissions_paused(session)  # core.switches owns the stored value


def set_paused(session: Session, paused: bool) -> None:
    set_submissions_paused(session, paused)


def restart_failure(restarts: int) -> str:
    times = {1: "once", 2: "twice"}.get(restarts, f"{restarts} times")
    return f"the bot restarted {times} while this job ran; it was not retried again — please resubmit"


@dataclass(frozen=True)
class Recovery:
    requeued: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


@dataclass
class _Lane:
    """One runner's share of the pool: its GPUs, its free slots, its wake-up signal."""

    runner: Runner
    gpus: list[str]
    slots: asyncio.Semaphore
    wake: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class _Claim:
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


class Pipeline:
    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        runners: Mapping[str, Runner],  # GPU name -> the runner that serves it here
        *,
        clock: Callable[[], datetime] = utcnow,
        worker_id: str | None = None,  # stable across restarts lets `recover` act at once
        bus: EventBus | None = None,
        poll_s: float = 1.0,
        on_rank_change: RankListener | None = None,
    ) -> None:
        self.engine, self.settings, self.clock = engine, settings, clock
        self.on_rank_change = on_rank_change
        self.worker_id = worker_id or f"{socket.gethostname()}:{os.getpid()}"
        self.bus = bus or EventBus()
        self.poll_s = poll_s
        self._lanes: dict[str, _Lane] = {}
        named: dict[str, Runner] = {}
        for gpu, runner in runners.items():
            if named.setdefault(runner.name, runner) is not runner:
                raise ValueError(f"two different runners are both named {runner.name!r}")
            # One lane per runner, or per GPU kind where the config gives each kind its own slots
            # (Modal: a queue of H100 jobs must not hold the slots of the T4 jobs behind it).
            per_gpu = settings.concurrency_per_gpu(runner.name)
            key = f"{runner.name}:{gpu}" if per_gpu else runner.name
            lane = self._lanes.get(key)
            if lane is None:
                count = settings.runner_concurrency(runner.name, gpu if per_gpu else None)
                lane = self._lanes[key] = _Lane(runner, [], asyncio.Semaphore(max(1, count)))
            lane.gpus.append(gpu)
        self._tasks: list[asyncio.Task[None]] = []
        self._running: dict[int, asyncio.Task[None]] = {}
        self._claims: dict[int, tuple[_Lane, _Claim]] = {}  # until its cleanup is done
        # Why a job's task was cancelled; any other reason (stop, loop shutdown) re-queues it.
        self._cancelled: set[int] = set()  # `cancel` was asked here
        self._lost: set[int] = set()  # the row was taken from us (cancelled elsewhere, reaped)
        self._stopping = False

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        if self._tasks:
            raise RuntimeError("the pipeline is already running")
        self._stopping = False
        await self.recover()
        self._tasks = [asyncio.create_task(self._dispatch(lane)) for lane in self._lanes.values()]
        self._tasks.append(asyncio.create_task(self._reap()))
        log.info("pipeline started", worker=self.worker_id, runners=sorted(self._lanes))

    async def stop(self, drain_s: float = 10.0) -> None:
        """Take no new jobs; let running ones finish for ``drain_s``, then re-queue the rest."""
        self._stopping = True
        self.wake()
        running = list(self._running.values())
        if running:
            await asyncio.wait(running, timeout=drain_s)
        for task in self._running.values():
            task.cancel()  # re-queued by _on_cancelled
        await asyncio.gather(*(self._settle(*item) for item in list(self._running.items())))
        if self._tasks:
            self._tasks[-1].cancel()  # the reaper; dispatchers return once they see _stopping
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        log.info("pipeline stopped", worker=self.worker_id)

    def wake(self) -> None:
        """A job was queued: let idle workers look now instead of at their next poll."""
        for lane in self._lanes.values():
            lane.wake.set()

    # -- queries and commands ------------------------------------------------------------------

    async def queue_position(self, job_id: int) -> int | None:
        def query() -> int | None:
            with session_scope(self.engine) as session:
                job = session.get(Job, job_id)
                return None if job is None else job_event(session, job).queue_position

        return await asyncio.to_thread(query)

    async def cancel(self, job_id: int) -> bool:
        """Cancel a queued job at once, or a running one through its runner; False if finished."""
        task = self._running.get(job_id)
        if task is not None:
            self._cancelled.add(job_id)
            task.cancel()
            await self._settle(job_id, task)
            return True
        # Queued, or running in another process: that worker sees the row at its next heartbeat.
        event = await asyncio.to_thread(self._cancel_row, job_id)
        if event is None:
            return False
        self.bus.publish(event)
        await self._refresh_positions()
        return True

    async def follow(self, submission_id: int) -> AsyncIterator[JobEvent]:
        async for event in follow(self.engine, self.bus, submission_id):
            yield event

    async def recover(self, at_start: bool = True) -> Recovery:
        """Re-queue (once) or fail the jobs a dead worker left running; see `_recover`."""
        recovery, events = await asyncio.to_thread(self._recover, at_start)
        for event in events:
            self.bus.publish(event)
        if recovery.requeued:
            self.wake()
        return recovery

    # -- workers -------------------------------------------------------------------------------

    async def _dispatch(self, lane: _Lane) -> None:
        """Start the oldest queued job whenever the lane has a free slot."""
        while not self._stopping:
            await lane.slots.acquire()
            if self._stopping:
                lane.slots.release()
                return
            lane.wake.clear()  # before claiming, so a wake-up during the claim is not lost
            try:
                claim = await asyncio.to_thread(self._claim, lane)
            except Exception:
                log.exception("claiming a job failed", runner=lane.runner.name)
                claim = None
            if claim is not None and self._stopping:  # claimed while `stop` began: put it back
                await asyncio.to_thread(self._requeue_row, claim.job_id)
                claim = None
            if claim is None:
                lane.slots.release()
                with suppress(TimeoutError):
                    await asyncio.wait_for(lane.wake.wait(), self.poll_s)
                continue
            task = asyncio.create_task(self._run_job(lane, claim))
            self._running[claim.job_id] = task
            self._claims[claim.job_id] = (lane, claim)
            task.add_done_callback(partial(self._release, lane, claim.job_id))

    def _release(self, lane: _Lane, job_id: int, task: asyncio.Task[None]) -> None:
        self._running.pop(job_id, None)
        lane.slots.release()
        if not task.cancelled():  # else `_settle` still has to clean up
            self._forget(job_id)

    def _forget(self, job_id: int) -> None:
        self._claims.pop(job_id, None)
        self._cancelled.discard(job_id)
        self._lost.discard(job_id)

    async def _settle(self, job_id: int, task: asyncio.Task[None]) -> None:
        """Wait for a cancelled job's task. A task cancelled before its first step never ran
        its own cleanup (`_on_cancelled`), and its row would stay running: do it here."""
        await asyncio.wait([task])
        entry = self._claims.get(job_id)
        if task.cancelled() and entry is not None:
            await self._on_cancelled(*entry)
        self._forget(job_id)

    async def _reap(self) -> None:
        """Recover jobs of workers that died while this process runs (other instances)."""
        while True:
            await asyncio.sleep(self.settings.limits.heartbeat_s)
            try:
                await self.recover(at_start=False)
            except Exception:
                log.exception("recovering stale jobs failed")

    async def _run_job(self, lane: _Lane, claim: _Claim) -> None:
        with structlog.contextvars.bound_contextvars(submission_id=claim.submission_id, job_id=claim.job_id):
            claim.heartbeat = asyncio.create_task(self._heartbeat(claim))
            try:
                self._publish(claim, status=RUNNING)
                await self._refresh_positions()
                await self._run_on_runner(lane, claim)
            except asyncio.CancelledError:
                await self._on_cancelled(lane, claim)
            except Exception as exc:  # a bug here must not leave the job running forever
                log.exception("job failed inside the pipeline")
                await self._finish(claim, JobStatus.FAILED, f"internal error: {exc!r}")
            finally:
                claim.heartbeat.cancel()

    async def _run_on_runner(self, lane: _Lane, claim: _Claim) -> None:
        if claim.spec is None:
            await self._finish(claim, JobStatus.FAILED, claim.error)
            return
        limit = runner_limit(claim.spec.timeout_s, self.settings.runner_grace_s(lane.runner.name))

        async def remember_ref(ref: str) -> None:
            claim.runner_ref = ref
            await asyncio.to_thread(self._update_running, claim.job_id, runner_ref=ref)

        context = RunContext(claim.job_id, claim.gpu, limit, claim.runner_ref, remember_ref)
        log.info("job started", runner=lane.runner.name, gpu=claim.gpu, limit_s=limit)

        async def on_progress(progress: Progress) -> None:
            await self._progress(claim, progress)

        try:
            result = await asyncio.wait_for(
                lane.runner.run(claim.spec, context, on_progress), limit + LAST_RESORT_SLACK_S
            )
        except TimeoutError:
            with suppress(Exception):
                await lane.runner.cancel(claim.job_id)
            message = f"the {lane.runner.name} runner did not return within {limit:g} s"
            await self._finish(claim, JobStatus.TIMED_OUT, message)
        except RunnerError as exc:
            status = JobStatus.TIMED_OUT if exc.timed_out else JobStatus.FAILED
            await self._finish(claim, status, str(exc))
        else:
            if result.job_id != claim.spec.job_id:
                message = f"the runner returned the result of job {result.job_id!r}"
                await self._finish(claim, JobStatus.FAILED, message)
            else:
                await self._finish(claim, None, None, result)

    async def _on_cancelled(self, lane: _Lane, claim: _Claim) -> None:
        """Stopped by `cancel`, because the row is no longer ours, or by `stop` (re-queued)."""
        if claim.heartbeat is not None:
            claim.heartbeat.cancel()  # its next beat must not take this cleanup for a loss
        # At a clean stop, or when recovery gave the job to another worker, remote work goes on:
        # the job keeps its runner_ref and its next run re-attaches to it.
        stop_work = claim.job_id in self._cancelled or (
            claim.job_id in self._lost and await asyncio.to_thread(self._is_cancelled, claim.job_id)
        )
        if stop_work:
            with suppress(Exception):
                await asyncio.wait_for(lane.runner.cancel(claim.job_id), 10)
        if claim.job_id in self._lost:
            log.warning("job taken over elsewhere; its run was stopped here")
        elif claim.job_id in self._cancelled:
            await self._finish(claim, JobStatus.CANCELLED, CANCELLED)
        else:
            event = await asyncio.to_thread(self._requeue_row, claim.job_id)
            if event is not None:
                self.bus.publish(event)
            log.info("job re-queued at shutdown")

    async def _progress(self, claim: _Claim, progress: Progress) -> None:
        changed = progress.phase != claim.phase
        claim.phase, claim.done, claim.total = progress.phase, progress.done, progress.total
        self._publish(claim, status=RUNNING)
        now = asyncio.get_running_loop().time()
        if changed or now - claim.written_at >= PROGRESS_WRITE_S:
            claim.written_at = now
            await self._beat(claim)

    async def _heartbeat(self, claim: _Claim) -> None:
        while True:
            await asyncio.sleep(self.settings.limits.heartbeat_s)
            await self._beat(claim)

    async def _beat(self, claim: _Claim) -> None:
        """Write heartbeat and progress; a row that is no longer ours stops the run."""
        text = progress_text(claim.phase, claim.done, claim.total)
        try:
            ours = await asyncio.to_thread(self._update_running, claim.job_id, progress=text)
        except Exception:
            log.exception("heartbeat failed")
            return
        task = self._running.get(claim.job_id)
        if not ours and task is not None and claim.job_id not in self._lost:
            self._lost.add(claim.job_id)
            task.cancel()

    async def _finish(
        self,
        claim: _Claim,
        status: JobStatus | None,
        error: str | None,
        result: Result | None = None,
    ) -> None:
        if claim.heartbeat is not None:
            claim.heartbeat.cancel()  # a beat after this commit would read as a lost job
        event = await asyncio.to_thread(self._finish_row, claim, status, error, result)
        if event is None:
            log.warning("job was taken over elsewhere; its outcome here was dropped", status=status)
            return
        self.bus.publish(event)
        log.info("job finished", status=event.status, run_id=event.run_id, error=error)
        if claim.rank_change is not None and claim.run is not None and self.on_rank_change is not None:
            try:
                await self.on_rank_change(claim.run, claim.rank_change)
            except Exception:
                log.exception("the rank-change listener failed")

    def _publish(self, claim: _Claim, status: JobStatus) -> None:
        progress = (claim.phase, claim.done, claim.total)
        self.bus.publish(JobEvent(claim.submission_id, claim.job_id, claim.gpu, *progress, status=status))

    async def _refresh_positions(self) -> None:
        """Tell listeners their new place in the queue; nobody listening costs nothing."""
        followed = self.bus.followed()
        if not followed:
            return
        for event in await asyncio.to_thread(self._queued_events, followed):
            self.bus.publish(event)

    # -- database (runs in threads) ------------------------------------------------------------

    def _claim(self, lane: _Lane) -> _Claim | None:
        """Mark the lane's oldest queued job ours; safe with several processes on one database."""
        now = self.clock()
        oldest = (
            select(Job.id)
            .where(Job.status == QUEUED, Job.runner == lane.runner.name, col(Job.gpu).in_(lane.gpus))
            .order_by(col(Job.id))
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
            taken = _Claim(job.id, job.submission_id, job.gpu, spec=None, runner_ref=job.runner_ref)
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

    def _ours(self, job_id: int) -> ColumnElement[bool]:
        return and_(col(Job.id) == job_id, col(Job.status) == RUNNING, col(Job.worker) == self.worker_id)

    def _change(
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

    def _update_running(self, job_id: int, **values: Any) -> bool:
        values["heartbeat_at"] = self.clock()
        return self._change(self._ours(job_id), values) is not None

    def _finish_row(
        self, claim: _Claim, status: JobStatus | None, error: str | None, result: Result | None
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
            run.result_json = result.to_json()
            run.system_json = json.dumps(asdict(result.system))
            session.add(run)
            session.flush()
            claim.rank_change = record_run(session, run)  # best scores, same transaction
            return run.id

        values = {"status": status, "error": error, "finished_at": self.clock(), "progress": None}
        return self._change(self._ours(claim.job_id), values, store_run)

    def _requeue_row(self, job_id: int) -> JobEvent | None:
        """A clean stop is not the job's fault: give the attempt back."""
        values = {"status": QUEUED, "attempts": col(Job.attempts) - 1, **_UNCLAIMED}
        return self._change(self._ours(job_id), values)

    def _is_cancelled(self, job_id: int) -> bool:
        with session_scope(self.engine) as session:
            job = session.get(Job, job_id)
            return job is None or job.status == JobStatus.CANCELLED

    def _cancel_row(self, job_id: int) -> JobEvent | None:
        where = and_(col(Job.id) == job_id, col(Job.status).in_([QUEUED, RUNNING]))
        values = {"status": JobStatus.CANCELLED, "error": CANCELLED, "finished_at": self.clock()}
        return self._change(where, values)

    def _queued_events(self, submission_ids: set[int]) -> list[JobEvent]:
        with session_scope(self.engine) as session:
            jobs = session.exec(
                select(Job).where(col(Job.submission_id).in_(submission_ids), Job.status == QUEUED)
            ).all()
            return [job_event(session, job) for job in jobs]

    def _recover(self, at_start: bool) -> tuple[Recovery, list[JobEvent]]:
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
            if job.id in self._running or not (mine or as_utc(beat) < stale_before):
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
            event = self._change(where, values)
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
