"""The job pipeline: workers that take queued jobs, run them on their runner and store results.

Jobs live in the database, so several bot processes can share one queue (PostgreSQL) and a
process that dies loses nothing: on start, and every heartbeat period after, jobs left running
by a dead worker are re-queued once or failed with a message the user can act on. All database
work runs in threads, so the event loop keeps serving chat while a worker writes.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial

import structlog
from sqlalchemy.engine import Engine

from kernelcup.core.config import Settings
from kernelcup.core.leaderboards.ranking import RankChange
from kernelcup.core.pipeline.events import EventBus, JobEvent, follow, job_event, progress_text
from kernelcup.core.pipeline.jobrows import CANCELLED, RUNNING, Claim, JobRows, Recovery
from kernelcup.core.pipeline.runner import RunContext, Runner, RunnerError
from kernelcup.core.pipeline.timeouts import runner_limit
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Job, JobStatus, Run, utcnow
from kernelcup.harness.spec import Progress, Result

# Told after a ranked run's commit changed its author's rank (e.g. to announce a new #1).
RankListener = Callable[[Run, RankChange], Awaitable[None]]

log = structlog.get_logger(__name__)

PROGRESS_WRITE_S = 0.5  # at most this often a progress event is written to the job's row
LAST_RESORT_SLACK_S = 5.0  # runners enforce their own limit; this catches one that hangs


@dataclass
class _Lane:
    """One runner's share of the pool: its GPUs, its free slots, its wake-up signal."""

    runner: Runner
    gpus: list[str]
    slots: asyncio.Semaphore
    wake: asyncio.Event = field(default_factory=asyncio.Event)


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
        self.rows = JobRows(engine, settings, self.worker_id, clock)
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
        self._claims: dict[int, tuple[_Lane, Claim]] = {}  # until its cleanup is done
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
        event = await asyncio.to_thread(self.rows.cancel_row, job_id)
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
        recovery, events = await asyncio.to_thread(self.rows.recover, at_start, set(self._running))
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
                claim = await asyncio.to_thread(self.rows.claim, lane.runner.name, lane.gpus)
            except Exception:
                log.exception("claiming a job failed", runner=lane.runner.name)
                claim = None
            if claim is not None and self._stopping:  # claimed while `stop` began: put it back
                await asyncio.to_thread(self.rows.requeue_row, claim.job_id)
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

    async def _run_job(self, lane: _Lane, claim: Claim) -> None:
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

    async def _run_on_runner(self, lane: _Lane, claim: Claim) -> None:
        if claim.spec is None:
            await self._finish(claim, JobStatus.FAILED, claim.error)
            return
        limit = runner_limit(claim.spec.timeout_s, self.settings.runner_grace_s(lane.runner.name))

        async def remember_ref(ref: str) -> None:
            claim.runner_ref = ref
            await asyncio.to_thread(self.rows.update_running, claim.job_id, runner_ref=ref)

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

    async def _on_cancelled(self, lane: _Lane, claim: Claim) -> None:
        """Stopped by `cancel`, because the row is no longer ours, or by `stop` (re-queued)."""
        if claim.heartbeat is not None:
            claim.heartbeat.cancel()  # its next beat must not take this cleanup for a loss
        # At a clean stop, or when recovery gave the job to another worker, remote work goes on:
        # the job keeps its runner_ref and its next run re-attaches to it.
        stop_work = claim.job_id in self._cancelled or (
            claim.job_id in self._lost and await asyncio.to_thread(self.rows.is_cancelled, claim.job_id)
        )
        if stop_work:
            with suppress(Exception):
                await asyncio.wait_for(lane.runner.cancel(claim.job_id), 10)
        if claim.job_id in self._lost:
            log.warning("job taken over elsewhere; its run was stopped here")
        elif claim.job_id in self._cancelled:
            await self._finish(claim, JobStatus.CANCELLED, CANCELLED)
        else:
            event = await asyncio.to_thread(self.rows.requeue_row, claim.job_id)
            if event is not None:
                self.bus.publish(event)
            log.info("job re-queued at shutdown")

    async def _progress(self, claim: Claim, progress: Progress) -> None:
        changed = progress.phase != claim.phase
        claim.phase, claim.done, claim.total = progress.phase, progress.done, progress.total
        self._publish(claim, status=RUNNING)
        now = asyncio.get_running_loop().time()
        if changed or now - claim.written_at >= PROGRESS_WRITE_S:
            claim.written_at = now
            await self._beat(claim)

    async def _heartbeat(self, claim: Claim) -> None:
        while True:
            await asyncio.sleep(self.settings.limits.heartbeat_s)
            await self._beat(claim)

    async def _beat(self, claim: Claim) -> None:
        """Write heartbeat and progress; a row that is no longer ours stops the run."""
        text = progress_text(claim.phase, claim.done, claim.total)
        try:
            ours = await asyncio.to_thread(self.rows.update_running, claim.job_id, progress=text)
        except Exception:
            log.exception("heartbeat failed")
            return
        task = self._running.get(claim.job_id)
        if not ours and task is not None and claim.job_id not in self._lost:
            self._lost.add(claim.job_id)
            task.cancel()

    async def _finish(
        self,
        claim: Claim,
        status: JobStatus | None,
        error: str | None,
        result: Result | None = None,
    ) -> None:
        if claim.heartbeat is not None:
            claim.heartbeat.cancel()  # a beat after this commit would read as a lost job
        event = await asyncio.to_thread(self.rows.finish_row, claim, status, error, result)
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

    def _publish(self, claim: Claim, status: JobStatus) -> None:
        progress = (claim.phase, claim.done, claim.total)
        self.bus.publish(JobEvent(claim.submission_id, claim.job_id, claim.gpu, *progress, status=status))

    async def _refresh_positions(self) -> None:
        """Tell listeners their new place in the queue; nobody listening costs nothing."""
        followed = self.bus.followed()
        if not followed:
            return
        for event in await asyncio.to_thread(self.rows.queued_events, followed):
            self.bus.publish(event)
