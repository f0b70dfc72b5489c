"""Job progress events, the in-process bus that carries them, and following one submission.

Adapters drive their live replies (message edits, progress bars) from these events. The bus only
reaches subscribers in this process, so ``follow`` also reads the job rows: a job run by another
instance, or finished before anyone listened, is still followed to its end.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the store is imported by the functions that read it: a client of events loads light
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from kernelcup.core.store.models import Job


class Phase(StrEnum):
    QUEUED = "queued"
    COMPILING = "compiling"  # also "started": the first thing every harness run does
    TESTING = "testing"
    BENCHMARKING = "benchmarking"
    PROFILING = "profiling"
    DONE = "done"  # the harness finished; the run itself may have failed its checks
    FAILED = "failed"  # no result: failed, timed out or cancelled (``status`` says which)


@dataclass(frozen=True)
class JobEvent:
    submission_id: int
    job_id: int
    gpu: str
    phase: str
    done: int = 0
    total: int = 0
    queue_position: int | None = None  # 1 = the next job its runner starts
    finished: bool = False
    status: str | None = None  # the job's JobStatus value
    run_id: int | None = None  # set once the harness's result is stored
    error: str | None = None  # why a job has no result, for the user


# What the job's fate is called where people and scripts read it (the API, the CLI): the stored
# ``succeeded`` only means the harness ran to its end, so beside a verdict that failed it would
# misread; and a job without a result ``errored``, which leaves "failed" to verdicts alone.
_STATE_OF_STATUS = {"succeeded": "completed", "failed": "errored"}


def job_state(status: str | None) -> str | None:
    """The job's fate in shown words: queued, running, completed, errored, timed_out, cancelled."""
    return _STATE_OF_STATUS.get(status, status) if status is not None else None


def progress_text(phase: str, done: int = 0, total: int = 0) -> str:
    """What ``Job.progress`` stores, so another process can rebuild the event."""
    return f"{phase} {done}/{total}" if total else phase


def parse_progress_text(text: str | None) -> tuple[str, int, int]:
    if not text:
        return Phase.COMPILING, 0, 0
    phase, _, counts = text.partition(" ")
    done, _, total = counts.partition("/")
    try:
        return phase, int(done), int(total)
    except ValueError:
        return phase, 0, 0


class Subscription:
    """One listener's bounded queue: a slow reader loses its oldest events, never memory.

    Losing an event is harmless: ``follow`` re-reads the job rows now and then.
    """

    def __init__(self, bus: EventBus, submission_id: int, maxsize: int) -> None:
        self._bus = bus
        self.submission_id = submission_id
        self._events: deque[JobEvent] = deque(maxlen=maxsize)
        self._ready = asyncio.Event()

    def offer(self, event: JobEvent) -> None:
        self._events.append(event)
        self._ready.set()

    async def get(self) -> JobEvent:
        while not self._events:
            self._ready.clear()
            await self._ready.wait()
        return self._events.popleft()

    def close(self) -> None:
        self._bus._remove(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class EventBus:
    """Publishes job events to this process's listeners, per submission.

    Use it from the event loop's thread only. A submission nobody listens to costs nothing.
    """

    def __init__(self, queue_size: int = 256) -> None:
        self._queue_size = queue_size
        self._subscribers: dict[int, set[Subscription]] = {}

    def subscribe(self, submission_id: int) -> Subscription:
        subscription = Subscription(self, submission_id, self._queue_size)
        self._subscribers.setdefault(submission_id, set()).add(subscription)
        return subscription

    def publish(self, event: JobEvent) -> None:
        for subscription in self._subscribers.get(event.submission_id, ()):
            subscription.offer(event)

    def followed(self) -> set[int]:
        """Submissions someone listens to: only their queue positions are worth refreshing."""
        return set(self._subscribers)

    def listeners(self, submission_id: int) -> int:
        return len(self._subscribers.get(submission_id, ()))

    def _remove(self, subscription: Subscription) -> None:
        listeners = self._subscribers.get(subscription.submission_id)
        if listeners is None:
            return
        listeners.discard(subscription)
        if not listeners:
            del self._subscribers[subscription.submission_id]


def queue_position(session: Session, job: Job) -> int | None:
    """1 + the queued jobs ahead of this one on its runner, in the order runners take them: by
    turn, then id (kernelcup.core.pipeline.fairness). Another user's new job can take a turn ahead of a long queue."""
    from sqlalchemy import and_, func, or_
    from sqlmodel import col, select

    from kernelcup.core.store.models import Job, JobStatus

    if job.status != JobStatus.QUEUED:
        return None
    ahead = session.exec(
        select(func.count())
        .select_from(Job)
        .where(Job.status == JobStatus.QUEUED, Job.runner == job.runner,
               or_(col(Job.turn) < job.turn, and_(col(Job.turn) == job.turn, col(Job.id) < job.id)))
    ).one()
    return int(ahead) + 1


def job_event(session: Session, job: Job, run_id: int | None = None) -> JobEvent:
    """What a job's row says now, as the event its owner would have published."""
    from sqlmodel import col, select

    from kernelcup.core.store.models import JobStatus, Run

    assert job.id is not None
    status = JobStatus(job.status)
    phase, done, total = parse_progress_text(job.progress)
    position = None
    if status is JobStatus.QUEUED:
        phase, done, total = Phase.QUEUED, 0, 0
        position = queue_position(session, job)
    elif status is not JobStatus.RUNNING:
        phase, done, total = (Phase.DONE if status is JobStatus.SUCCEEDED else Phase.FAILED), 0, 0
        run_id = (
            run_id
            or session.exec(
                select(Run.id).where(Run.job_id == job.id).order_by(col(Run.id).desc()).limit(1)
            ).first()
        )
    return JobEvent(
        submission_id=job.submission_id,
        job_id=job.id,
        gpu=job.gpu,
        phase=phase,
        done=done,
        total=total,
        queue_position=position,
        finished=status.finished,
        status=status,
        run_id=run_id,
        error=job.error if status.finished else None,
    )


def submission_events(engine: Engine, submission_id: int) -> list[JobEvent]:
    from sqlmodel import col, select

    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.models import Job

    with session_scope(engine) as session:
        jobs = session.exec(
            select(Job).where(Job.submission_id == submission_id).order_by(col(Job.id))
        ).all()
        return [job_event(session, job) for job in jobs]


async def follow(
    engine: Engine,
    bus: EventBus,
    submission_id: int,
    poll_s: float = 0.5,
    max_quiet_poll_s: float = 2.0,
) -> AsyncIterator[JobEvent]:
    """Yield a submission's events until all its jobs are finished.

    Starts with each job's current state (so a finished submission ends at once), then takes
    events from the bus; when the bus is quiet for ``poll_s`` (the job runs in another process),
    or at least every ``max_quiet_poll_s``, it re-reads the rows.
    """
    with bus.subscribe(submission_id) as subscription:
        last: dict[int, JobEvent] = {}
        live: set[int] = set()  # jobs whose progress arrives on the bus, fresher than their rows
        for event in await asyncio.to_thread(submission_events, engine, submission_id):
            last[event.job_id] = event
            yield event
        polled_at, heard = time.monotonic(), False
        while last and not all(event.finished for event in last.values()):
            wait = (max_quiet_poll_s if heard else poll_s) - (time.monotonic() - polled_at)
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that
                # arrives with an event, and a stopping bot would then wait for the job to end.
                async with asyncio.timeout(max(wait, 0.0)):
                    event = await subscription.get()
            except TimeoutError:
                pass
            else:
                heard = True
                previous = last.get(event.job_id)
                if previous is None or (not previous.finished and event != previous):
                    live.add(event.job_id)
                    last[event.job_id] = event
                    yield event
                continue
            rows = await asyncio.to_thread(submission_events, engine, submission_id)
            for event in _changes(rows, last, live):
                last[event.job_id] = event
                yield event
            polled_at, heard = time.monotonic(), False


def _changes(
    rows: Iterable[JobEvent], last: dict[int, JobEvent], live: set[int]
) -> Iterable[JobEvent]:
    """Row events that tell a follower something new; progress of live jobs is left to the bus."""
    from kernelcup.core.store.models import JobStatus

    for event in rows:
        previous = last.get(event.job_id)
        if previous is None:
            yield event
        elif previous.finished or event == previous:
            continue
        elif event.status != previous.status or event.finished:
            yield event
        elif event.status == JobStatus.QUEUED:
            yield event  # a new queue position
        elif event.job_id not in live:
            yield event  # progress of a job another process runs
