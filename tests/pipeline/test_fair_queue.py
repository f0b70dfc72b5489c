"""The queue takes turns across users (kernelcup.core.pipeline.fairness): one person's 100 jobs do not push the
next person back 100 places, and the position each job is told is the order it then runs in.
``engine`` runs each test on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy.engine import Engine

from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.store.models import JobStatus

from .support import FakeRunner, make_settings, seed_leaderboard, submit, wait_for_status

pytestmark = pytest.mark.timeout(60)


def one_slot(engine: Engine, runner: FakeRunner) -> Pipeline:
    return Pipeline(engine, make_settings(concurrency=1), {"cpu": runner, "H100": runner})


async def run_all(engine: Engine, runner: FakeRunner, last: list[int]) -> None:
    pipe = one_slot(engine, runner)
    await pipe.start()
    for job_id in last:
        await wait_for_status(engine, job_id, JobStatus.SUCCEEDED, timeout=30)
    await pipe.stop()


async def test_a_users_job_waits_behind_one_job_of_a_heavy_user_not_all_of_them(engine: Engine) -> None:
    seed_leaderboard(engine)
    heavy = submit(engine, count=100, user="console:alice")
    [light] = submit(engine, user="console:bob")
    runner = FakeRunner()
    await run_all(engine, runner, [*heavy, light])
    assert runner.started.index(light) == 1  # after alice's first job, not her hundredth
    assert runner.started[0] == heavy[0]
    assert [j for j in runner.started if j != light] == heavy  # alice's own jobs keep their order


async def test_three_users_take_turns_in_submission_order(engine: Engine) -> None:
    seed_leaderboard(engine)
    alice = submit(engine, count=3, user="console:alice")
    bob = submit(engine, count=3, user="console:bob")
    [carol] = submit(engine, user="console:carol")
    runner = FakeRunner()
    await run_all(engine, runner, [*alice, *bob, carol])
    assert runner.started == [alice[0], bob[0], carol, alice[1], bob[1], alice[2], bob[2]]


async def test_a_newcomer_takes_the_turn_the_queue_has_reached(engine: Engine) -> None:
    """Bob arrives while Alice's backlog runs: he takes the turn the queue has reached, then they
    alternate."""
    seed_leaderboard(engine)
    alice = submit(engine, count=6, user="console:alice")
    gate = asyncio.Event()
    runner = FakeRunner(gate=gate)
    pipe = one_slot(engine, runner)
    await pipe.start()
    await wait_for_status(engine, alice[0], JobStatus.RUNNING)
    bob = submit(engine, count=2, user="console:bob")
    gate.set()
    for job_id in [*alice, *bob]:
        await wait_for_status(engine, job_id, JobStatus.SUCCEEDED, timeout=30)
    await pipe.stop()
    assert runner.started[:5] == [alice[0], alice[1], bob[0], alice[2], bob[1]]


async def test_the_queue_position_told_is_the_order_jobs_then_run_in(engine: Engine) -> None:
    seed_leaderboard(engine)
    jobs = submit(engine, count=4, user="console:alice") + submit(engine, count=2, user="console:bob")
    jobs += submit(engine, count=1, user="console:carol")
    runner = FakeRunner()
    watcher = one_slot(engine, runner)  # not started: positions only
    positions: dict[int, int] = {}
    for job_id in jobs:
        position = await watcher.queue_position(job_id)
        assert position is not None
        positions[job_id] = position
    assert sorted(positions.values()) == list(range(1, len(jobs) + 1))
    await run_all(engine, runner, jobs)
    assert runner.started == sorted(jobs, key=lambda job_id: positions[job_id])
    assert positions[jobs[4]] == 2  # bob's first job: second, not fifth
