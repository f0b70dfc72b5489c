"""A leaderboard that needs a CUDA GPU is known as such at sync: ``list`` says where it runs, and
``submit`` refuses a GPU it cannot run on in one line, before any job is queued.

The real command core on a real database (SQLite and PostgreSQL), the leaderboards synced from a
folder: the shipped vectoradd_cuda (``lang: cu``), a Python task whose ``generate_input`` makes
its inputs on "cuda" (tests/compat/leaderboards/cuda_only), and shipped Python ones that take the
run's device (the control).
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.config import load_settings
from kernelcup.core.leaderboards.devices import cuda_reason
from kernelcup.core.messages import Table
from kernelcup.core.store.models import Job, Leaderboard, Submission
from tests.core.conftest import ALICE, NOW, InstantRunner, request, solution

ROOT = Path(__file__).resolve().parents[2]
COMPAT = ROOT / "tests/compat/leaderboards"
ADD_ONCE = b"def custom_kernel(data):\n    a, b, out = data\n    out.copy_(a + b)\n    return out\n"


class GpuRunner(InstantRunner):
    """A machine with an H100: the local runner serves that card, not the CPU."""

    def gpus(self) -> list[str]:
        return ["H100"]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "leaderboards"
    for name in ("vectoradd", "vectoradd_cuda"):
        shutil.copytree(ROOT / "leaderboards" / name, root / name)
    shutil.copy(ROOT / "leaderboards/utils.py", root / "utils.py")
    shutil.copytree(COMPAT / "cuda_only", root / "cuda_inputs")
    return root


async def started(engine: Engine, runner: InstantRunner, folder: Path, synced: bool = False) -> Kernelcup:
    settings = replace(load_settings(env={}), leaderboards_dir=folder)
    app = Kernelcup(settings, engine, {"local": runner}, clock=lambda: NOW)
    report = app.sync_if_empty()
    assert report is None if synced else (report is not None and not report.errors), report
    await app.pipeline.start()
    return app


@pytest.fixture
async def cpu_app(core_engine: Engine, runner: InstantRunner, folder: Path) -> AsyncIterator[Kernelcup]:
    app = await started(core_engine, runner, folder)
    yield app
    await app.pipeline.stop()


@pytest.fixture
async def gpu_app(core_engine: Engine, folder: Path) -> AsyncIterator[Kernelcup]:
    app = await started(core_engine, GpuRunner(), folder)
    yield app
    await app.pipeline.stop()


def listed(reply_tables: list[Table]) -> dict[str, str]:
    """``list``'s GPUs column by leaderboard."""
    (table,) = reply_tables
    return {row[0]: row[2] for row in table.rows}


async def gpus_listed(app: Kernelcup) -> dict[str, str]:
    reply = await app.handle(request("list"))
    assert reply.ok
    return listed([b for b in reply.blocks if isinstance(b, Table)])


def rows(app: Kernelcup) -> tuple[int, int]:
    with Session(app.engine) as session:
        return (session.exec(select(func.count()).select_from(Submission)).one(),
                session.exec(select(func.count()).select_from(Job)).one())


async def refused_in_one_line(app: Kernelcup, board: str, file: dict[str, bytes], gpu: list[str] | None = None) -> str:
    before = rows(app)
    reply = await app.handle(request("submit", files=file, mode="test", leaderboard=board, gpu=gpu))
    assert not reply.ok
    assert rows(app) == before, "a refused submission left a submission or job row"
    text = reply.text().strip()
    assert "\n" not in text, f"not one line: {text!r}"
    return text


def stored_needs_cuda(app: Kernelcup) -> dict[str, bool]:
    with Session(app.engine) as session:
        return {b.name: b.needs_cuda for b in session.exec(select(Leaderboard)).all()}


async def test_sync_stores_which_leaderboards_need_cuda(cpu_app: Kernelcup) -> None:
    assert stored_needs_cuda(cpu_app) == {"vectoradd": False, "vectoradd_cuda": True, "cuda_inputs": True}


async def test_list_on_a_cpu_only_bot_says_a_cuda_leaderboard_runs_on_no_gpu_here(cpu_app: Kernelcup) -> None:
    shown = await gpus_listed(cpu_app)
    assert shown["vectoradd"] == "cpu"
    assert shown["vectoradd_cuda"].startswith("no GPU here (needs CUDA: CUDA source; runs on H100")
    assert shown["cuda_inputs"] == "no GPU here (needs CUDA: its inputs are made on cuda)"


async def test_submitting_cuda_source_to_a_cpu_only_bot_is_refused_naming_where_it_runs(cpu_app: Kernelcup) -> None:
    cu = {"k.cu": solution("vectoradd_cuda", "simple.cu")}
    text = await refused_in_one_line(cpu_app, "vectoradd_cuda", cu)
    assert text == ("vectoradd_cuda needs a CUDA GPU (CUDA source): it runs on H100, H200, A100, L4, T4, B200, "
                    "and this bot has none of them.")
    assert await refused_in_one_line(cpu_app, "vectoradd_cuda", cu, gpu=["cpu"]) == text


async def test_a_python_task_making_inputs_on_cuda_is_refused_on_a_cpu_only_bot(cpu_app: Kernelcup) -> None:
    text = await refused_in_one_line(cpu_app, "cuda_inputs", {"k.py": ADD_ONCE})
    assert text == "cuda_inputs needs a CUDA GPU (its inputs are made on cuda), and this bot has no GPU it can run on."


async def test_a_leaderboard_that_runs_on_the_cpu_is_still_queued(cpu_app: Kernelcup) -> None:
    reply = await cpu_app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test",
                                         leaderboard="vectoradd"))
    assert reply.ok and reply.submission_id is not None
    assert rows(cpu_app) == (1, 1)


async def test_on_a_gpu_bot_a_cuda_leaderboard_opens_on_the_gpu_and_refuses_the_cpu(gpu_app: Kernelcup) -> None:
    shown = await gpus_listed(gpu_app)
    assert shown["vectoradd_cuda"] == "H100 (CUDA only)" and shown["vectoradd"] == "H100"
    cu = {"k.cu": solution("vectoradd_cuda", "simple.cu")}
    text = await refused_in_one_line(gpu_app, "vectoradd_cuda", cu, gpu=["cpu"])
    assert text == "vectoradd_cuda needs a CUDA GPU (CUDA source) and cannot run on the CPU: submit it to H100."
    reply = await gpu_app.handle(request("submit", files=cu, mode="test", leaderboard="vectoradd_cuda"))
    assert reply.ok and rows(gpu_app) == (1, 1)


def test_the_rules_prefer_what_the_task_declares_over_reading_its_source() -> None:
    makes_on_cuda = {"reference.py": "def generate_input(size, seed):\n    return torch.ones(size, device='cuda')\n"}
    takes_device = {"reference.py": "def generate_input(size, seed, device='cuda'):\n    return torch.ones(size)\n"}
    on_default = {"reference.py": "def generate_input(size, seed):\n    return torch.ones(size)\n"}
    assert cuda_reason({"lang": "cu"}, {}) == "CUDA source"
    assert cuda_reason({"lang": "cu", "gpus": ["H100", "cpu"]}, {}) is None  # the task says it runs on the CPU
    assert cuda_reason({"lang": "py"}, makes_on_cuda) == "its inputs are made on cuda"
    assert cuda_reason({"lang": "py"}, makes_on_cuda, gpus=["cpu"]) is None  # a problem set names the CPU
    assert cuda_reason({"lang": "py"}, takes_device) is None  # the harness hands it the run's device
    assert cuda_reason({"lang": "py"}, on_default) is None
    assert cuda_reason({"lang": "py"}, {"reference.py": "x = ("}) is None  # unreadable: left to the harness


async def test_a_cuda_leaderboard_synced_on_the_cpu_opens_on_a_gpu_served_later(
    core_engine: Engine, runner: InstantRunner, folder: Path
) -> None:
    before = await started(core_engine, runner, folder)  # a CPU-only bot synced the folder first
    await before.pipeline.stop()
    app = await started(core_engine, GpuRunner(), folder, synced=True)  # the same database, on an H100 machine
    try:
        reply = await app.handle(request("sync", actor=ALICE))  # console:* is admin in the shipped roles
        assert reply.ok, reply.text()
        shown = await gpus_listed(app)
        assert shown["vectoradd_cuda"] == "H100 (CUDA only)" and shown["cuda_inputs"] == "H100 (CUDA only)"
        assert shown["vectoradd"] == "cpu"  # one that already runs here keeps its GPUs
    finally:
        await app.pipeline.stop()
