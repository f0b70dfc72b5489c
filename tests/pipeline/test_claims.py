"""Two pipelines on one database (two engines: two connection pools, as two processes would
have) never run the same job twice: PostgreSQL through FOR UPDATE SKIP LOCKED, SQLite through
its single writer and the conditional update. ``engine`` runs each test on both databases."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.core.store.db import make_engine
from kernelcup.core.store.models import Job, JobStatus, Run
from kernelcup.harness.spec import JobSpec, Result

from .support import FakeRunner, make_settings, seed_leaderboard, submit, wait_for_status

pytestmark = pytest.mark.timeout(60)


class YieldingRunner(FakeRunner):
    """Gives the loop a moment per job, so both pipelines race for every claim."""

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        await asyncio.sleep(0.001)
        return await super().run(spec, context, on_progress)


async def run_two_pipelines(engine: Engine, jobs: int) -> None:
    seed_leaderboard(engine)
    job_ids = submit(engine, count=jobs)
    second_engine = make_engine(engine.url.render_as_string(hide_password=False))
    runners = [YieldingRunner(), YieldingRunner()]
    # A slow heartbeat: on a loaded machine a 0.2 s one lets each pipeline take the other for
    # dead (and rightly re-run its jobs); this test is about claims only.
    settings = make_settings(concurrency=4, heartbeat_s=5.0)
    pipes = [
        Pipeline(pool, settings, {"cpu": runner}, worker_id=f"bot-{i}")
        for i, (pool, runner) in enumerate(zip([engine, second_engine], runners, strict=True))
    ]
    await asyncio.gather(*(pipe.start() for pipe in pipes))
    await wait_for_status(engine, job_ids[-1], JobStatus.SUCCEEDED, timeout=40)
    unfinished = select(func.count()).select_from(Job).where(Job.status != JobStatus.SUCCEEDED)
    for _ in range(200):
        with Session(engine) as session:
            if session.exec(unfinished).one() == 0:
                break
        await asyncio.sleep(0.05)
    await asyncio.gather(*(pipe.stop() for pipe in pipes))
    second_engine.dispose()

    started = Counter(runners[0].started + runners[1].started)
    assert sorted(started) == job_ids and set(started.values()) == {1}
    assert runners[0].started and runners[1].started  # both really took part
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Run)).one() == jobs
        assert session.exec(select(Job.attempts).distinct()).all() == [1]


async def test_two_pipelines_on_one_database_never_run_a_job_twice(engine: Engine) -> None:
    await run_two_pipelines(engine, jobs=200)


async def test_a_job_locked_by_another_claim_is_skipped_not_waited_for(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("row locks (FOR UPDATE SKIP LOCKED) are PostgreSQL's; SQLite has one writer")
    seed_leaderboard(engine)
    first, second = submit(engine, count=2)
    pipe = Pipeline(engine, make_settings(), {"cpu": FakeRunner()}, poll_s=0.1)
    with Session(engine) as holder:  # another process mid-claim holds the oldest row
        holder.execute(update(Job).where(col(Job.id) == first).values(progress="held"))
        await pipe.start()
        await wait_for_status(engine, second, JobStatus.SUCCEEDED)
        holder.rollback()
    await wait_for_status(engine, first, JobStatus.SUCCEEDED)
    await pipe.stop()
