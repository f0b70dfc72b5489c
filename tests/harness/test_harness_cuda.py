"""CUDA leaderboards on a machine without a GPU: the nvcc build, its cache, and the protocol.

Nothing CUDA runs here; the driver protocol is exercised with stand-in driver programs (shell
scripts that speak it), through the same code that runs a real driver.
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import LEADERBOARDS, REPO, leaderboard_spec, run_harness, submission

from kernelcup.harness import cuda_eval
from kernelcup.harness.process import StreamCapture, child_identity
from kernelcup.harness.spec import Status
from kernelcup.harness.verdict import RunEnded
from kernelcup.harness.workspace import Workspace

COPY = LEADERBOARDS / "copy_cu"
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture
def cache(tmp_path: Path) -> dict[str, str]:
    directory = tmp_path / "cache"
    directory.mkdir()
    return {"KERNELCUP_CACHE_DIR": str(directory)}


@needs_nvcc
def test_a_cuda_submission_compiles_then_needs_a_gpu(cache: dict[str, str]) -> None:
    spec = leaderboard_spec(COPY, submission("copy_good.cu"), timeout_s=180)
    first = run_harness(spec, env=cache).outcome()
    assert first.status is Status.ERROR
    assert first.verdict.startswith("compiled;")
    started = time.monotonic()
    second = run_harness(spec, env=cache).outcome()
    assert "cached build" in second.compile_log
    assert time.monotonic() - started < 60


@needs_nvcc
def test_an_nvcc_error_is_a_compile_error_with_the_log(cache: dict[str, str]) -> None:
    spec = leaderboard_spec(COPY, submission("copy_syntax_error.cu"), timeout_s=180)
    result = run_harness(spec, env=cache).outcome()
    assert result.status is Status.COMPILE_ERROR
    assert 'expected a ";"' in result.verdict
    assert "submission.cu" in result.compile_log


def test_a_cuda_leaderboard_without_sources_is_a_compile_error(cache: dict[str, str]) -> None:
    spec = leaderboard_spec(COPY, submission("copy_good.cu"), timeout_s=60)
    spec.task.sources = ["missing.cu"]
    result = run_harness(spec, env=cache).outcome()
    assert result.status is Status.COMPILE_ERROR


def test_cases_are_written_in_gpu_modes_format() -> None:
    assert cuda_eval.case_line({"size": 128, "seed": 5236, "kind": "fast"}) == "size: 128; seed: 5236; kind: fast"
    with pytest.raises(RunEnded):
        cuda_eval.case_line({"scale": 0.5})


# --- the driver protocol, with stand-in drivers --------------------------------------------


@pytest.fixture
def workspace() -> Iterator[Workspace]:
    spec = leaderboard_spec(COPY, "// unused", timeout_s=30)
    space = Workspace.create(spec, child_identity())
    yield space
    space.cleanup()


def _driver(workspace: Workspace, script: str) -> Path:
    path = workspace.work / "fake_driver"
    path.write_text("#!/bin/bash\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def _run(
    workspace: Workspace, driver: Path, mode: str, cases: list[dict[str, int]], seconds: float = 20
) -> dict[str, str]:
    outputs: list[tuple[StreamCapture, StreamCapture]] = []
    return cuda_eval._run_binary(
        driver, mode, cases, workspace, time.monotonic() + seconds, seconds, "while testing", outputs
    )


def test_driver_reports_are_read_from_popcorn_fd(workspace: Workspace) -> None:
    driver = _driver(
        workspace,
        'test "$1" = test || exit 9\n'
        'read line < "$2"\n'
        'printf "test-count: 2\\ntest.0.spec: %s\\ntest.0.status: pass\\n" "$line" >&$POPCORN_FD\n'
        'printf "test.1.spec: x\\ntest.1.status: fail\\ntest.1.error: off by one\\ncheck: fail\\n" >&$POPCORN_FD\n'
        "exit 112\n",
    )
    cases = [{"size": 3, "seed": 1}, {"size": 4, "seed": 2}]
    report = _run(workspace, driver, "test", cases)
    tests = cuda_eval._tests_from(report, cases)
    assert report["test.0.spec"] == "size: 3; seed: 1"
    assert [t.passed for t in tests] == [True, False]
    assert tests[1].message == "off by one"


def test_durations_from_the_driver_become_full_statistics(workspace: Workspace) -> None:
    driver = _driver(
        workspace,
        'printf "benchmark-count: 1\\nbenchmark.0.spec: s\\n" >&$POPCORN_FD\n'
        'printf "benchmark.0.durations: 10,12,11,13,11\\ncheck: pass\\n" >&$POPCORN_FD\n',
    )
    report = _run(workspace, driver, "benchmark", [{"size": 1, "seed": 1}])
    case = cuda_eval._benchmark_from(report, 0, {"size": 1}, "benchmark 1 of 1")
    assert (case.runs, case.median_ns, case.min_ns, case.max_ns) == (5, 11.0, 10.0, 13.0)


def test_gpu_mode_style_statistics_are_accepted_without_durations(workspace: Workspace) -> None:
    driver = _driver(
        workspace,
        'printf "benchmark.0.runs: 3\\nbenchmark.0.mean: 20.5\\nbenchmark.0.best: 19\\ncheck: pass\\n" >&$POPCORN_FD\n',
    )
    report = _run(workspace, driver, "benchmark", [{"size": 1, "seed": 1}])
    case = cuda_eval._benchmark_from(report, 0, {"size": 1}, "benchmark 1 of 1")
    assert case.median_ns == 20.5 and "mean used" in case.message


def test_a_driver_killed_by_a_signal_is_a_crash(workspace: Workspace) -> None:
    driver = _driver(workspace, 'printf "test-count: 1\\n" >&$POPCORN_FD\nkill -SEGV $$\n')
    with pytest.raises(RunEnded) as ended:
        _run(workspace, driver, "test", [{"size": 1, "seed": 1}])
    assert ended.value.status is Status.CRASHED and "segmentation fault" in ended.value.verdict


def test_a_hanging_driver_times_out_naming_the_running_case(workspace: Workspace) -> None:
    driver = _driver(
        workspace,
        'printf "test-count: 2\\ntest.0.spec: a\\ntest.0.status: pass\\ntest.1.spec: size: 9\\n" >&$POPCORN_FD\n'
        "sleep 60\n",
    )
    started = time.monotonic()
    with pytest.raises(RunEnded) as ended:
        _run(workspace, driver, "test", [{"size": 1, "seed": 1}], seconds=2)
    assert ended.value.status is Status.TIMED_OUT
    assert "test 2 (size: 9)" in ended.value.verdict
    assert time.monotonic() - started < 10
    assert os.path.exists(driver)


def test_a_report_written_over_with_another_value_fails_the_run(workspace: Workspace) -> None:
    # What a submission sharing the driver's process does when it writes its own times last.
    driver = _driver(
        workspace,
        'printf "benchmark.0.durations: 9000,9100,9050\\ncheck: pass\\n" >&$POPCORN_FD\n'
        'printf "benchmark.0.durations: 1,1,1\\n" >&$POPCORN_FD\n',
    )
    with pytest.raises(RunEnded) as ended:
        _run(workspace, driver, "benchmark", [{"size": 1, "seed": 1}])
    assert ended.value.status is Status.FAILED
    assert "'benchmark.0.durations' twice" in ended.value.verdict


def test_a_value_repeated_unchanged_is_no_forgery(workspace: Workspace) -> None:
    driver = _driver(workspace, 'printf "check: pass\\ncheck: pass\\n" >&$POPCORN_FD\n')
    assert _run(workspace, driver, "benchmark", [])["check"] == "pass"


def test_cuda_leaderboards_get_the_physical_floor_from_their_reference_py() -> None:
    from kernelcup.harness import benchmark
    from kernelcup.harness.problem import ProblemError, Work
    from kernelcup.harness.spec import CaseResult, GpuInfo

    work = Work((REPO / "leaderboards" / "vectoradd_cuda" / "reference.py").read_text())
    assert work.work({"size": 1000, "seed": 1}) == (1000.0, 6000.0)
    gpu = GpuInfo(name="H200", peak_tflops=989.0, peak_bandwidth_gbps=4800.0)
    # 10^8 elements move 600 MB: 125 µs at 4.8 TB/s. A reported 50 µs is no measurement.
    forged = CaseResult(case={"size": 100_000_000}, passed=True, median_ns=50_000.0)
    with pytest.raises(RunEnded) as ended:
        benchmark.roofline(forged, work, forged.case, gpu, "cuda", "benchmark 3 of 3", 50 << 20)
    assert ended.value.status is Status.FAILED and "physical floor" in ended.value.verdict
    honest = CaseResult(case={"size": 100_000_000}, passed=True, median_ns=145_000.0)
    benchmark.roofline(honest, work, honest.case, gpu, "cuda", "benchmark 3 of 3", 50 << 20)
    assert honest.gbps == pytest.approx(4137.9, rel=1e-3)
    assert Work(None).work({"size": 1}) == (None, None)  # GPU MODE's own CUDA leaderboards
    with pytest.raises(ProblemError):
        Work("def bytes(size):\n    return 1 / 0\n").work({"size": 1})
