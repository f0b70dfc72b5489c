"""The Modal runner inside the real pipeline (SQLite), with its real client (``ModalSDK``) against
the stub ``modal`` SDK (tests/stubs/modal): the call id lives in the job row, so a stopped or
crashed bot re-attaches to the running call; cancels reach Modal and end the call; each GPU
kind has its own slots."""

from __future__ import annotations

import secrets
from datetime import timedelta
from pathlib import Path
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
from tests.pipeline.support import job, seed_leaderboard, submit, wait_for_status
from tests.runners.conftest import ModalStub, process_gone, until
from tests.runners.scripted_harness import Script

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
WAIT_S = 60.0  # containers are processes: a loaded box takes seconds to start one


def settings(concurrency: Any = 2) -> Settings:
    return Settings(
        limits=Limits(heartbeat_s=0.2, runner_grace_s=5.0),
        gpus={
            "H100": GpuConfig("H100", "modal", options={"modal_gpu": "H100!"}),
            "T4": GpuConfig("T4", "modal", options={"modal_gpu": "T4"}),
        },
        runners={"modal": {"poll_s": 0.02, "concurrency": concurrency}},
    )


def pipeline(engine: Engine, modal: ModalStub, worker_id: str = "bot-1", concurrency: Any = 2) -> Pipeline:
    config = settings(concurrency)
    runner = modal.runner(config)
    return Pipeline(engine, config, {"H100": runner, "T4": runner}, worker_id=worker_id, poll_s=0.05)


def gated(modal: ModalStub) -> tuple[Path, Path]:
    """Deploy H100 and T4 functions whose harness waits at a gate; the gate and the harness's pid file."""
    gate, pid_file = modal.gate(), modal.tmp_path / "harness.pid"
    script = Script(gate=str(gate), pid_file=str(pid_file))
    modal.deploy({"run_h100": script, "run_t4": script})
    return gate, pid_file


async def wait_for_ref(engine: Engine, job_id: int) -> str:
    refs: list[str] = []

    def remembered() -> bool:
        refs.append(job(engine, job_id).runner_ref or "")
        return bool(refs[-1])

    await until(remembered, "the call id in the job row", WAIT_S)
    return refs[-1]


async def test_a_stopped_bot_re_attaches_to_its_modal_call_after_the_restart(
    engine: Engine, modal_stub: ModalStub
) -> None:
    gate, _ = gated(modal_stub)
    seed_leaderboard(engine)
    [job_id] = submit(engine, gpus=("H100",), runner="modal")
    first = pipeline(engine, modal_stub)
    await first.start()
    ref = await wait_for_ref(engine, job_id)
    await first.stop(drain_s=0.1)
    row = job(engine, job_id)
    assert (row.status, row.runner_ref, modal_stub.server.cancelled) == (JobStatus.QUEUED, ref, [])

    second = pipeline(engine, modal_stub)
    await second.start()
    await wait_for_status(engine, job_id, JobStatus.RUNNING, timeout=WAIT_S)
    gate.touch()
    row = await wait_for_status(engine, job_id, JobStatus.SUCCEEDED, timeout=WAIT_S)
    await second.stop()
    assert len(modal_stub.server.calls) == 1 and row.error is None


async def test_a_job_left_running_by_a_crashed_bot_is_recovered_onto_the_same_call(
    engine: Engine, modal_stub: ModalStub
) -> None:
    modal_stub.deploy({"run_h100": Script()})
    seed_leaderboard(engine)
    [job_id] = submit(engine, gpus=("H100",), runner="modal")
    key = secrets.token_hex(32)  # the dead bot's spec, and so its key, are gone with it
    old_spec = JobSpec(str(job_id), Mode.TEST, TaskConfig(), {}, "submission.py", 60, gpu=GpuInfo("H100"),
                       result_key=key)
    call_id = await modal_stub.runners.ModalSDK().spawn("kernelcup", "run_h100", old_spec.to_json(), 75.0)
    long_ago = utcnow() - timedelta(minutes=5)
    with session_scope(engine) as session:
        session.execute(update(Job).where(col(Job.id) == job_id).values(
            status=JobStatus.RUNNING, worker="bot-dead:1", attempts=1, started_at=long_ago, heartbeat_at=long_ago,
            runner_ref=f"modal:{call_id}:{key}"))

    pipe = pipeline(engine, modal_stub, worker_id="bot-2")
    await pipe.start()
    row = await wait_for_status(engine, job_id, JobStatus.SUCCEEDED, timeout=WAIT_S)
    await pipe.stop()
    assert len(modal_stub.server.calls) == 1 and row.attempts == 2


async def test_cancelling_a_running_job_ends_its_modal_call(engine: Engine, modal_stub: ModalStub) -> None:
    _, pid_file = gated(modal_stub)
    seed_leaderboard(engine)
    [job_id] = submit(engine, gpus=("H100",), runner="modal")
    pipe = pipeline(engine, modal_stub)
    await pipe.start()
    await wait_for_ref(engine, job_id)
    await until(pid_file.exists, "the harness in the container", WAIT_S)
    assert await pipe.cancel(job_id) is True
    await pipe.stop()
    assert job(engine, job_id).status == JobStatus.CANCELLED
    assert modal_stub.server.cancelled == list(modal_stub.server.calls)
    await until(lambda: process_gone(int(pid_file.read_text())), "the harness's end", WAIT_S)


async def test_a_backlog_on_one_gpu_kind_leaves_the_other_kinds_slots_free(
    engine: Engine, modal_stub: ModalStub
) -> None:
    modal_stub.deploy({"run_h100": Script(gate=str(modal_stub.gate())), "run_t4": Script(gpu="Tesla T4")})
    seed_leaderboard(engine)
    h100_jobs = submit(engine, gpus=("H100",), runner="modal", count=3)
    [t4_job] = submit(engine, gpus=("T4",), runner="modal")
    pipe = pipeline(engine, modal_stub, concurrency={"default": 1})
    await pipe.start()
    await wait_for_status(engine, h100_jobs[0], JobStatus.RUNNING, timeout=WAIT_S)
    await wait_for_status(engine, t4_job, JobStatus.SUCCEEDED, timeout=WAIT_S)
    statuses = [job(engine, job_id).status for job_id in h100_jobs]
    await pipe.stop(drain_s=0)
    assert statuses == [JobStatus.RUNNING, JobStatus.QUEUED, JobStatus.QUEUED]
