"""The Modal runner inside the real pipeline (SQLite): the call id lives in the job row, so a
stopped or crashed bot re-attaches to the running call; cancels reach Modal; each GPU kind has
its own slots."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import col

from kernelcup.core.config import GpuConfig, Limits, Settings
from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Job, JobStatus, utcnow
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, TaskConfig
from kernelcup.runners.modal import ModalRunner
from tests.pipeline.support import job, seed_leaderboard, submit, wait_for_status
from tests.runners.fake_modal import FakeModal, Remote, Report, harness_output

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def settings(concurrency: Any = 2) -> Settings:
    return Settings(
        limits=Limits(heartbeat_s=0.2, runner_grace_s=5.0),
        gpus={
            "H100": GpuConfig("H100", "modal", options={"modal_gpu": "H100!"}),
            "T4": GpuConfig("T4", "modal", options={"modal_gpu": "T4"}),
        },
        runners={"modal": {"poll_s": 0.02, "concurrency": concurrency}},
    )


def pipeline(engine: Engine, modal_side: FakeModal, worker_id: str = "bot-1", concurrency: Any = 2) -> Pipeline:
    config = settings(concurrency)
    runner = ModalRunner(config, client=modal_side)
    return Pipeline(engine, config, {"H100": runner, "T4": runner}, worker_id=worker_id, poll_s=0.05)


@pytest.fixture
async def modal_side() -> AsyncIterator[FakeModal]:
    side = FakeModal(harness_output(gate=asyncio.Event()))
    yield side
    await side.finish_all()


def gated(modal_side: FakeModal) -> asyncio.Event:
    gate = asyncio.Event()
    modal_side.remote = harness_output(gate=gate)
    return gate


async def wait_for_ref(engine: Engine, job_id: int) -> str:
    for _ in range(500):
        ref = (await asyncio.to_thread(job, engine, job_id)).runner_ref
        if ref:
            return ref
        await asyncio.sleep(0.02)
    raise AssertionError("the call id never reached the job row")


async def test_a_stopped_bot_re_attaches_to_its_modal_call_after_the_restart(
    engine: Engine, modal_side: FakeModal
) -> None:
    gate = gated(modal_side)
    seed_leaderboard(engine)
    [job_id] = submit(engine, gpus=("H100",), runner="modal")
    first = pipeline(engine, modal_side)
    await first.start()
    ref = await wait_for_ref(engine, job_id)
    await first.stop(drain_s=0.1)
    row = job(engine, job_id)
    assert (row.status, row.runner_ref, modal_side.cancelled) == (JobStatus.QUEUED, ref, [])

    second = pipeline(engine, modal_side)
    await second.start()
    await wait_for_status(engine, job_id, JobStatus.RUNNING)
    gate.set()
    row = await wait_for_status(engine, job_id, JobStatus.SUCCEEDED)
    await second.stop()
    assert len(modal_side.calls) == 1 and row.error is None


async def test_a_job_left_running_by_a_crashed_bot_is_recovered_onto_the_same_call(
    engine: Engine, modal_side: FakeModal
) -> None:
    modal_side.remote = harness_output()
    seed_leaderboard(engine)
    [job_id] = submit(engine, gpus=("H100",), runner="modal")
    key = secrets.token_hex(32)  # the dead bot's spec, and so its key, are gone with it
    old_spec = JobSpec(str(job_id), Mode.TEST, TaskConfig(), {}, "submission.py", 60, gpu=GpuInfo("H100"),
                       result_key=key)
    call_id = await modal_side.spawn("kernelcup", "run_h100", old_spec.to_json(), 75.0)
    long_ago = utcnow() - timedelta(minutes=5)
    with session_scope(engine) as session:
        session.execute(update(Job).where(col(Job.id) == job_id).values(
            status=JobStatus.RUNNING, worker="bot-dead:1", attempts=1, started_at=long_ago, heartbeat_at=long_ago,
            runner_ref=f"modal:{call_id}:{key}"))

    pipe = pipeline(engine, modal_side, worker_id="bot-2")
    await pipe.start()
    row = await wait_for_status(engine, job_id, JobStatus.SUCCEEDED)
    await pipe.stop()
    assert len(modal_side.calls) == 1 and row.attempts == 2


async def test_cancelling_a_running_job_cancels_its_modal_call(engine: Engine, modal_side: FakeModal) -> None:
    gated(modal_side)
    seed_leaderboard(engine)
    [job_id] = submit(engine, gpus=("H100",), runner="modal")
    pipe = pipeline(engine, modal_side)
    await pipe.start()
    await wait_for_ref(engine, job_id)
    assert await pipe.cancel(job_id) is True
    await pipe.stop()
    assert job(engine, job_id).status == JobStatus.CANCELLED
    assert modal_side.cancelled == list(modal_side.calls)


async def test_a_backlog_on_one_gpu_kind_leaves_the_other_kinds_slots_free(
    engine: Engine, modal_side: FakeModal
) -> None:
    busy, free = harness_output(gate=asyncio.Event()), harness_output(gpu="Tesla T4")

    async def by_card(spec_json: str, kill_after_s: float, report: Report) -> dict[str, Any]:
        remote: Remote = busy if json.loads(spec_json)["gpu"]["name"] == "H100" else free
        return await remote(spec_json, kill_after_s, report)

    modal_side.remote = by_card
    seed_leaderboard(engine)
    h100_jobs = submit(engine, gpus=("H100",), runner="modal", count=3)
    [t4_job] = submit(engine, gpus=("T4",), runner="modal")
    pipe = pipeline(engine, modal_side, concurrency={"default": 1})
    await pipe.start()
    await wait_for_status(engine, h100_jobs[0], JobStatus.RUNNING)
    await wait_for_status(engine, t4_job, JobStatus.SUCCEEDED)
    statuses = [job(engine, job_id).status for job_id in h100_jobs]
    await pipe.stop(drain_s=0)
    assert statuses == [JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.QUEUED]
