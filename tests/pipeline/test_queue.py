"""The pipeline's queue: order, concurrency, events, positions, cancel, stop, recovery."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.leaderboards.ranking import RankChange
from kernelcup.core.pipeline.events import EventBus, JobEvent
from kernelcup.core.pipeline.jobrows import STALE_HEARTBEATS, Claim, restart_failure
from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.pipeline.jobspec import build_spec
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, RunnerError
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import BestScore, Job, JobStatus, Run, utcnow
from kernelcup.core.store.switches import set_submissions_paused as set_paused
from kernelcup.core.store.switches import submissions_paused as is_paused
from kernelcup.harness.spec import JobSpec, Mode, Progress, Result, Status

from .support import FakeRunner, job, make_settings, seed_leaderboard, submit, wait_for_status

pytestmark = pytest.mark.timeout(30)
# The bound on waiting for what a few database writes and event-loop turns bring about, on a box
# several times slower than a quiet one (as support.wait_for_status's): each test waits for the
# event it needs and fails only where it has not come by then.
WAIT_S = 10.0


def pipeline(
    engine: Engine, runner: FakeRunner, concurrency: int = 1, heartbeat_s: float = 0.2, **kwargs: Any
) -> Pipeline:
    settings = make_settings(concurrency=concurrency, heartbeat_s=heartbeat_s)
    return Pipeline(engine, settings, {"cpu": runner, "H100": runner}, **kwargs)


async def collect(pipe: Pipeline, submission_id: int) -> list[JobEvent]:
    return [event async for event in pipe.follow(submission_id)]


async def until(condition: Callable[[], bool], seconds: float = WAIT_S) -> None:
    limit = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < limit, f"not within {seconds:g} s"
        await asyncio.sleep(0.01)


class Following:
    """A submission's events as ``follow`` yields them, kept as they come."""

    def __init__(self, pipe: Pipeline, submission_id: int) -> None:
        self.events: list[JobEvent] = []
        self._task = asyncio.create_task(self._collect(pipe, submission_id))

    async def _collect(self, pipe: Pipeline, submission_id: int) -> None:
        async for event in pipe.follow(submission_id):
            self.events.append(event)

    async def ended(self) -> list[JobEvent]:
        await asyncio.wait_for(self._task, WAIT_S)
        return self.events


class Slots(asyncio.Semaphore):
    """A lane's slots, as the pipeline sizes them, that tell when its dispatcher waits for one."""

    def __init__(self, value: int = 1) -> None:
        super().__init__(value)
        self.all_taken = asyncio.Event()  # the dispatcher asked for a slot and none was free

    async def acquire(self) -> Literal[True]:
        if self.locked():
            self.all_taken.set()
        return await super().acquire()


def watched_slots(monkeypatch: pytest.MonkeyPatch, make: Callable[[], Pipeline]) -> tuple[Pipeline, Slots]:
    """``make()``'s pipeline, whose one lane's slots are :class:`Slots` of the size it chose."""
    made: list[Slots] = []

    def slots(value: int = 1) -> Slots:
        made.append(Slots(value))
        return made[-1]

    with monkeypatch.context() as patch:
        patch.setattr(asyncio, "Semaphore", slots)
        pipe = make()
    [lane] = made
    return pipe, lane


def watch_claims(pipe: Pipeline, monkeypatch: pytest.MonkeyPatch) -> list[Claim | None]:
    """What each of the pipeline's claims found (None: no job it could start), in order."""
    found: list[Claim | None] = []
    claim = pipe.rows.claim

    def watched(*args: Any) -> Claim | None:
        found.append(claim(*args))
        return found[-1]

    monkeypatch.setattr(pipe.rows, "claim", watched)
    return found


async def test_jobs_start_oldest_first_within_the_runner_concurrency_limit(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_leaderboard(engine)
    job_ids = submit(engine, count=12)
    gate = asyncio.Event()
    runner = FakeRunner(gate=gate)
    pipe, slots = watched_slots(monkeypatch, lambda: pipeline(engine, runner, concurrency=3))
    await pipe.start()
    # The dispatcher started what the limit allows and waits for a slot; were the limit not kept,
    # it would have claimed a fourth job (its row running) before it ever waited.
    await asyncio.wait_for(slots.all_taken.wait(), WAIT_S)
    assert [job(engine, i).status for i in job_ids] == [JobStatus.RUNNING] * 3 + [JobStatus.QUEUED] * 9
    await until(lambda: runner.running == 3)
    assert runner.started == job_ids[:3]
    gate.set()
    await wait_for_status(engine, job_ids[-1], JobStatus.SUCCEEDED)
    await pipe.stop()
    assert runner.started == job_ids
    assert runner.most_running == 3
    assert {job(engine, i).status for i in job_ids} == {JobStatus.SUCCEEDED}


async def test_a_result_is_stored_as_a_run_and_the_job_succeeds(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    pipe = pipeline(engine, FakeRunner(status=Status.FAILED))
    await pipe.start()
    done = await wait_for_status(engine, job_id, JobStatus.SUCCEEDED)
    await pipe.stop()
    with Session(engine) as session:
        run = session.exec(select(Run).where(Run.job_id == job_id)).one()
    assert (run.passed, run.score, run.gpu, run.mode) == (False, 0.002, "cpu", "test")
    assert json.loads(run.result_json)["status"] == "failed"
    assert done.attempts == 1 and done.finished_at is not None and done.error is None


async def test_wake_starts_a_new_submission_without_waiting_for_the_poll(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed_leaderboard(engine)
    poll_s = 30.0
    pipe = pipeline(engine, FakeRunner(), poll_s=poll_s)
    claims = watch_claims(pipe, monkeypatch)
    await pipe.start()
    await until(lambda: claims == [None])  # found nothing to start: idle until its next poll
    [job_id] = submit(engine)
    pipe.wake()
    await wait_for_status(engine, job_id, JobStatus.SUCCEEDED, timeout=poll_s / 3)
    await pipe.stop()


async def test_progress_events_reach_follow_in_order(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    progress = [Progress("compiling"), Progress("testing", 1, 2), Progress("testing", 2, 2)]
    pipe = pipeline(engine, FakeRunner(progress=[*progress, Progress("benchmarking", 1, 1)]))
    following = Following(pipe, submission_id=1)
    await until(lambda: bool(following.events))  # it has read the queued state
    await pipe.start()
    events = await following.ended()
    await pipe.stop()
    phases = [(e.phase, e.done, e.total) for e in events]
    assert phases[0] == ("queued", 0, 0) and events[0].queue_position == 1
    assert phases[1:] == [
        ("compiling", 0, 0),
        ("testing", 1, 2),
        ("testing", 2, 2),
        ("benchmarking", 1, 1),
        ("done", 0, 0),
    ]
    last = events[-1]
    assert last.finished and last.status == JobStatus.SUCCEEDED and last.job_id == job_id
    with Session(engine) as session:
        assert session.exec(select(Run.id).where(Run.job_id == job_id)).one() == last.run_id


async def test_following_a_finished_submission_ends_at_once(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    pipe = pipeline(engine, FakeRunner())
    await pipe.start()
    await wait_for_status(engine, job_id, JobStatus.SUCCEEDED)
    await pipe.stop()
    events = await asyncio.wait_for(collect(pipe, 1), WAIT_S)
    assert [(e.phase, e.finished, e.run_id is not None) for e in events] == [("done", True, True)]
    assert await asyncio.wait_for(collect(pipe, 999), WAIT_S) == []


async def test_follow_sees_jobs_run_by_another_process(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    gate = asyncio.Event()
    worker = pipeline(engine, FakeRunner(gate=gate, progress=[Progress("testing", 1, 3)]))
    watcher = Pipeline(engine, make_settings(), {}, bus=EventBus())  # runs nothing
    seen: list[JobEvent] = []

    async def watch() -> None:
        async for event in watcher.follow(1):
            seen.append(event)

    watching = asyncio.create_task(watch())
    while not seen:  # the queued state first, before the worker takes the job
        await asyncio.sleep(0.01)
    await worker.start()
    await until(lambda: any(e.phase == "testing" for e in seen))  # read from the rows: its bus hears nothing
    gate.set()
    await asyncio.wait_for(watching, WAIT_S)
    await worker.stop()
    # "compiling" shows when a poll falls between the claim and the first progress write.
    assert [e.phase for e in seen if e.phase != "compiling"] == ["queued", "testing", "done"]
    testing = next(e for e in seen if e.phase == "testing")
    assert (testing.done, testing.total) == (1, 3)
    assert seen[-1].job_id == job_id and seen[-1].run_id is not None


async def test_queue_positions_are_announced_and_refreshed(engine: Engine) -> None:
    seed_leaderboard(engine)
    first, _, third = submit(engine, count=3)
    gate = asyncio.Event()
    pipe = pipeline(engine, FakeRunner(gate=gate))
    await pipe.start()
    await wait_for_status(engine, first, JobStatus.RUNNING)
    assert await pipe.queue_position(first) is None
    assert await pipe.queue_position(third) == 2
    following = Following(pipe, 3)
    await until(lambda: bool(following.events))  # it has read its place in the queue
    gate.set()
    events = await following.ended()
    await pipe.stop()
    positions = [e.queue_position for e in events if e.phase == "queued"]
    assert positions == [2, 1]
    assert events[-1].phase == "done"


async def test_cancelling_a_queued_job_is_immediate(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    seed_leaderboard(engine)
    first, second = submit(engine, count=2)
    gate = asyncio.Event()
    runner = FakeRunner(gate=gate)
    pipe = pipeline(engine, runner)
    claims = watch_claims(pipe, monkeypatch)
    await pipe.start()
    await wait_for_status(engine, first, JobStatus.RUNNING)
    assert await pipe.cancel(second) is True
    assert job(engine, second).status == JobStatus.CANCELLED
    gate.set()
    await wait_for_status(engine, first, JobStatus.SUCCEEDED)
    await until(lambda: None in claims)  # its slot free again, the dispatcher looked and found nothing
    await pipe.stop()
    assert runner.started == [first]
    assert await pipe.cancel(second) is False  # already finished


async def test_cancelling_a_running_job_goes_through_its_runner(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    runner = FakeRunner(gate=asyncio.Event())
    pipe = pipeline(engine, runner)
    await pipe.start()
    await wait_for_status(engine, job_id, JobStatus.RUNNING)
    assert await pipe.cancel(job_id) is True
    row = job(engine, job_id)
    await pipe.stop()
    assert (row.status, row.error) == (JobStatus.CANCELLED, "cancelled on request")
    assert runner.cancelled == [job_id]


async def test_a_job_cancelled_before_its_task_first_runs_is_still_cancelled(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    runner = FakeRunner(gate=asyncio.Event())
    pipe = pipeline(engine, runner)
    await pipe.start()
    # Peeks at the private table of tasks to land between the claim and the task's first step.
    while job_id not in pipe._running:
        await asyncio.sleep(0)
    assert await pipe.cancel(job_id) is True
    row = job(engine, job_id)
    await pipe.stop()
    assert (row.status, row.error) == (JobStatus.CANCELLED, "cancelled on request")
    assert runner.started == []


async def test_a_job_cancelled_by_another_process_is_stopped_at_the_next_heartbeat(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    runner = FakeRunner(gate=asyncio.Event())
    pipe = pipeline(engine, runner)
    other = Pipeline(engine, make_settings(), {})
    await pipe.start()
    await wait_for_status(engine, job_id, JobStatus.RUNNING)
    assert await other.cancel(job_id) is True
    await until(lambda: bool(runner.cancelled))  # at a heartbeat of this pipeline's, every 0.2 s
    await pipe.stop()
    assert runner.cancelled == [job_id]
    assert job(engine, job_id).status == JobStatus.CANCELLED


async def test_stop_requeues_unfinished_jobs_without_spending_an_attempt(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    pipe = pipeline(engine, FakeRunner(gate=asyncio.Event()))
    await pipe.start()
    await wait_for_status(engine, job_id, JobStatus.RUNNING)
    await pipe.stop(drain_s=0.1)
    row = job(engine, job_id)
    assert (row.status, row.attempts, row.worker) == (JobStatus.QUEUED, 0, None)


class BrokenRunner(FakeRunner):
    def __init__(self, error: RunnerError) -> None:
        super().__init__()
        self.error = error

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        raise self.error


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (RunnerError("the harness exited with code 3 without a result"), JobStatus.FAILED),
        (RunnerError("ran past the runner limit", timed_out=True), JobStatus.TIMED_OUT),
    ],
)
async def test_a_runner_error_finishes_the_job_with_its_message(
    engine: Engine, error: RunnerError, status: JobStatus
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    pipe = pipeline(engine, BrokenRunner(error))
    await pipe.start()
    row = await wait_for_status(engine, job_id, status)
    await pipe.stop()
    assert row.error == str(error)


async def test_a_harness_timeout_result_marks_the_job_timed_out_and_keeps_the_run(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    pipe = pipeline(engine, FakeRunner(status=Status.TIMED_OUT))
    await pipe.start()
    row = await wait_for_status(engine, job_id, JobStatus.TIMED_OUT)
    await pipe.stop()
    assert row.error == "verdict"
    with Session(engine) as session:
        assert session.exec(select(Run).where(Run.job_id == job_id)).one().passed is False


async def test_a_job_whose_leaderboard_is_unreadable_fails_clearly(engine: Engine) -> None:
    seed_leaderboard(engine, files=[])  # no @SUBMISSION@ entry
    [job_id] = submit(engine)
    pipe = pipeline(engine, FakeRunner())
    await pipe.start()
    row = await wait_for_status(engine, job_id, JobStatus.FAILED)
    await pipe.stop()
    assert row.error is not None and row.error.startswith("the job could not be prepared")


def leave_running(engine: Engine, job_id: int, worker: str, attempts: int, age_s: float) -> None:
    with session_scope(engine) as session:
        row = session.get(Job, job_id)
        assert row is not None
        row.status, row.worker, row.attempts = JobStatus.RUNNING, worker, attempts
        row.started_at = row.heartbeat_at = utcnow() - timedelta(seconds=age_s)
        session.add(row)


async def test_recovery_requeues_a_dead_workers_job_once_then_fails_it(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    retried, given_up, alive = submit(engine, count=3)
    # Heartbeats far apart: the job that beat just now stays alive for the whole test however slow
    # the box (its worker never beats again here); the ghost fell silent twice the stale age ago.
    stale_s = STALE_HEARTBEATS * WAIT_S
    leave_running(engine, retried, "ghost", attempts=1, age_s=2 * stale_s)
    leave_running(engine, given_up, "ghost", attempts=2, age_s=2 * stale_s)
    leave_running(engine, alive, "busy-elsewhere", attempts=1, age_s=0)
    pipe = pipeline(engine, FakeRunner(), heartbeat_s=WAIT_S)
    recovery = await pipe.recover()
    assert (recovery.requeued, recovery.failed) == ([retried], [given_up])
    await pipe.start()
    await wait_for_status(engine, retried, JobStatus.SUCCEEDED)
    await pipe.stop()
    failed = job(engine, given_up)
    assert (failed.status, failed.error) == (JobStatus.FAILED, restart_failure(2))
    assert "restarted twice" in restart_failure(2) and "please resubmit" in restart_failure(2)
    assert job(engine, alive).status == JobStatus.RUNNING  # its worker is alive


async def test_recovery_at_start_takes_back_our_own_previous_lifes_jobs(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    leave_running(engine, job_id, "bot-1", attempts=1, age_s=0)
    pipe = pipeline(engine, FakeRunner(), worker_id="bot-1")
    await pipe.start()
    row = await wait_for_status(engine, job_id, JobStatus.SUCCEEDED)
    await pipe.stop()
    assert row.attempts == 2


def test_the_pause_switch_is_shared_through_the_database(engine: Engine) -> None:
    with session_scope(engine) as session:
        assert is_paused(session) is False
        set_paused(session, True)
    with session_scope(engine) as session:
        assert is_paused(session) is True
        set_paused(session, False)
    with session_scope(engine) as session:
        assert is_paused(session) is False


@pytest.mark.parametrize(("mode", "gpu"), [("test", "cpu"), ("ranked", "H100")])
def test_the_spec_carries_the_task_files_and_the_submission(engine: Engine, mode: str, gpu: str) -> None:
    seed_leaderboard(engine, ranked_timeout=42)
    [job_id] = submit(engine, gpus=[gpu], mode=mode)
    with Session(engine) as session:
        row = session.get(Job, job_id)
        assert row is not None
        spec = build_spec(session, row, make_settings())
        other = build_spec(session, row, make_settings())
    code = "def custom_kernel(data): return data"
    assert spec.files == {"task.py": "# task", "submission.py": code}
    assert spec.submission_name == "submission.py" and spec.mode == Mode(mode)
    assert spec.task.tests == [{"size": 8, "seed": 1}]
    assert len(spec.result_key) == 64 and spec.result_key != other.result_key
    if mode == "ranked":
        assert (spec.secret_seed, spec.timeout_s, spec.device) == (987654321, 42.0, "cuda")
        assert (spec.gpu.name, spec.gpu.peak_bandwidth_gbps) == ("H100", 3350)
    else:
        assert (spec.secret_seed, spec.timeout_s, spec.device) == (None, 180.0, "cpu")


async def test_a_ranked_run_updates_best_scores_and_reports_the_rank_change(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine, mode="ranked")
    changes: list[tuple[Run, RankChange]] = []

    async def on_rank_change(run: Run, change: RankChange) -> None:
        changes.append((run, change))

    pipe = pipeline(engine, FakeRunner(), on_rank_change=on_rank_change)
    await pipe.start()
    await wait_for_status(engine, job_id, JobStatus.SUCCEEDED)
    await pipe.stop()
    [(run, change)] = changes
    assert (run.job_id, run.score, change.new_rank, change.old_rank) == (job_id, 0.002, 1, None)
    with Session(engine) as session:
        best = session.exec(select(BestScore)).one()
    assert (best.run_id, best.score) == (run.id, 0.002)
