"""A CPU job is timed on the leaderboard's ``cpu_benchmarks`` where task.yml gives them
(core/leaderboards/tasks.py task_config), on its ``benchmarks`` everywhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcup.core.errors import UserError
from kernelcup.core.leaderboards.tasks import read_task_folder, validate_task
from kernelcup.core.pipeline.jobspec import spec_for
from kernelcup.harness.spec import GpuInfo, Mode

SHIPPED = Path(__file__).resolve().parents[2] / "leaderboards"


def _spec(task: dict[str, object], device: str, mode: Mode = Mode.RANKED) -> list[dict[str, object]]:
    spec = spec_for(task, {}, "x = 1", mode, job_id="1", gpu=GpuInfo(device), device=device,
                    secret_seed=7, default_timeout_s=60)
    return spec.task.benchmarks


def test_a_cpu_job_gets_the_cpu_sizes_and_a_gpu_job_the_gpu_sizes() -> None:
    task = read_task_folder(SHIPPED / "vectoradd", reach=SHIPPED).task
    assert [c["size"] for c in _spec(task, "cpu")] == [256, 512, 1000]
    assert [c["size"] for c in _spec(task, "cpu", Mode.BENCHMARK)] == [256, 512, 1000]
    assert [c["size"] for c in _spec(task, "cuda")] == [4096, 8192, 10000]


def test_a_task_without_cpu_sizes_is_timed_on_its_benchmarks_on_the_cpu() -> None:
    task = read_task_folder(SHIPPED / "vectorsum", reach=SHIPPED).task
    assert "cpu_benchmarks" not in task
    assert _spec(task, "cpu") == _spec(task, "cuda") == task["benchmarks"]


def test_cpu_benchmarks_that_are_not_a_list_of_cases_are_refused() -> None:
    task = read_task_folder(SHIPPED / "vectoradd", reach=SHIPPED).task
    with pytest.raises(UserError, match="cpu_benchmarks"):
        validate_task({**task, "cpu_benchmarks": [256, 512]})
