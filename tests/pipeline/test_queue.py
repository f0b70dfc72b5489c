"""The pipeline's queue: order, concurrency, events, positions, cancel, stop, recovery."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.leaderboards.ranking import RankChange
from kernelcup.core.pipeline.events import EventBus, JobEvent
from kernelcup.core.pipeline.jobrows import restart_failure
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


def pipeline(engine: Engine, runner: FakeRunner, concurrency: int = 1, **kwargs: Any) -> Pipeline:
    settings = make_settings(concurrency=concurrency)
    return Pipeline(engine, settings, {"cpu": runner, "H100": runner}, **kwargs)


async def collect(pipe: Pipeline, submission_id: int) -> list[JobEvent]:
    return [event async for event in pipe.follow(submission_id)]


async def test_jobs_start_oldest_first_within_the_runner_concurrency_limit(
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    job_ids = submit(engine, count=12)
    gate = asyncio.Event()
    runner = FakeRunner(gate=gate)
    pipe = pipeline(engine, runner, concurrency=3)
    await pipe.start()
    await wait_for_status(engine, job_ids[2], JobStatus.RUNNING)
    await asyncio.sleep(0.3)  # time enough to start a fourth, were the limit not kept
    assert runner.started == job_ids[:3] and runner.running == 3
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
    engine: Engine,
) -> None:
    seed_leaderboard(engine)
    pipe = pipeline(engine, FakeRunner(), poll_s=30)
    await pipe.start()
    await asyncio.sleep(0.1)  # idle, waiting up to 30 s
    [job_id] = submit(engine)
    pipe.wake()
    await wait_for_status(engine, job_id, JobStatus.SUCCEEDED, timeout=2)
    await pipe.stop()


async def test_progress_events_reach_follow_in_order(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine)
    progress = [Progress("compiling"), Progress("testing", 1, 2), Progress("testing", 2, 2)]
    pipe = pipeline(engine, FakeRunner(progress=[*progress, Progress("benchmarking", 1, 1)]))
    following = asyncio.create_task(collect(pipe, submission_id=1))
    await asyncio.sleep(0.1)
    await pipe.start()
    events = await asyncio.wait_for(following, 10)
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
    events = await asyncio.wait_for(collect(pipe, 1), 2)
    assert [(e.phase, e.finished, e.run_id is not None) for e in events] == [("done", True, True)]
    assert await asyncio.wait_for(collect(pipe, 999), 2) == []


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
    await asyncio.sleep(1.2)  # the watcher has only the rows to go by
    gate.set()
    await asyncio.wait_for(watching, 10)
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
    following = asyncio.create_task(collect(pipe, 3))
    await asyncio.sleep(0.1)
    gate.set()
    events = await asyncio.wait_for(following, 10)
    await pipe.stop()
    positions = [e.queue_position for e in events if e.phase == "queued"]
    assert positions == [2, 1]
    assert events[-1].phase == "done"


async def test_cancelling_a_queued_job_is_immediate(engine: Engine) -> None:
    seed_leaderboard(engine)
    first, second = submit(engine, count=2)
    gate = asyncio.Event()
    runner = FakeRunner(gate=gate)
    pipe = pipeline(engine, runner)
    await pipe.start()
    await wait_for_status(engine, first, JobStatus.RUNNING)
    assert await pipe.cancel(second) is True
    assert job(engine, second).status == JobStatus.CANCELLED
    gate.set()
    await wait_for_status(engine, first, JobStatus.SUCCEEDED)
    await asyncio.sleep(0.2)
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
    for _ in range(50):
        if runner.cancelled:
            break
        await asyncio.sleep(0.05)
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
    leave_running(engine, retried, "ghost", attempts=1, age_s=60)
    leave_running(engine, given_up, "ghost", attempts=2, age_s=60)
    leave_running(engine, alive, "busy-elsewhere", attempts=1, age_s=0)
    pipe = pipeline(engine, FakeRunner())
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
