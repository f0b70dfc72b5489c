"""Benchmark, ranked and profile modes through the real harness, on the CPU."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import DEVICE, LEADERBOARDS, HarnessRun, leaderboard_spec, run_many, submission

from kernelcup.harness import benchmark, scoring
from kernelcup.harness.spec import CaseResult, GpuInfo, Mode, Status
from kernelcup.harness.verdict import RunEnded

ADDMUL = LEADERBOARDS / "addmul"
SECRET = 31415926535897932384626


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    specs = {
        "benchmark": leaderboard_spec(ADDMUL, submission("correct.py"), Mode.BENCHMARK, timeout_s=60),
        "ranked_a": leaderboard_spec(ADDMUL, submission("correct.py"), Mode.RANKED, timeout_s=90, secret_seed=SECRET),
        "ranked_b": leaderboard_spec(ADDMUL, submission("correct.py"), Mode.RANKED, timeout_s=90, secret_seed=SECRET),
        "crash": leaderboard_spec(ADDMUL, submission("crash_in_benchmark.py"), Mode.BENCHMARK),
        "profile": leaderboard_spec(ADDMUL, submission("correct.py"), Mode.PROFILE, timeout_s=60),
    }
    # Only ranked_b's tests are read (their seeds): without benchmarks its job ends after them.
    specs["ranked_b"].task.benchmarks = []
    batch: dict[str, HarnessRun] = run_many(specs, workers=2)
    return batch


def test_benchmark_reports_statistics_for_every_case(runs: dict[str, HarnessRun]) -> None:
    result = runs["benchmark"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert [b.case for b in result.benchmarks] == [{"size": 1000, "seed": 21}, {"size": 4000, "seed": 22}]
    for case in result.benchmarks:
        assert case.runs >= 10
        assert case.min_ns is not None and case.median_ns is not None and case.max_ns is not None
        assert case.min_ns <= case.median_ns <= case.max_ns
        assert case.ci_low_ns is not None and case.ci_high_ns is not None
        assert case.ci_low_ns <= case.median_ns <= case.ci_high_ns
        assert case.mean_ns and case.std_ns is not None
        assert case.gbps and case.tflops  # reference.py defines bytes() and flops()


def test_the_score_is_the_leaderboards_combination_of_medians(runs: dict[str, HarnessRun]) -> None:
    result = runs["benchmark"].outcome()
    medians = [(b.median_ns or 0) * 1e-9 for b in result.benchmarks]
    assert result.score_s == pytest.approx(scoring.combine("geom", medians))
    assert "score" in result.verdict


def test_benchmark_mode_reports_progress_and_system_info(runs: dict[str, HarnessRun]) -> None:
    run = runs["benchmark"]
    phases = [(p.phase, p.done, p.total) for p in run.progress]
    assert ("testing", 3, 3) in phases and ("benchmarking", 2, 2) in phases
    system = run.outcome().system
    assert system.device == DEVICE and system.torch and system.python and system.isolation


def test_ranked_runs_test_with_derived_seeds_never_the_public_ones(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked_a"].outcome()
    assert result.status is Status.PASSED, result.verdict
    public = {11, 12, 13}
    assert not {t.case["seed"] for t in result.tests} & public


def test_each_ranked_run_draws_new_inputs(runs: dict[str, HarnessRun]) -> None:
    a = [t.case["seed"] for t in runs["ranked_a"].outcome().tests]
    b = [t.case["seed"] for t in runs["ranked_b"].outcome().tests]
    assert len(a) == len(b) == 3
    assert not set(a) & set(b)


def test_ranked_results_carry_a_score(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked_a"].outcome()
    assert result.score_s is not None and result.score_s > 0
    assert result.verdict.startswith("all 3 tests passed; ranked score")


def test_a_ranked_score_carries_its_noise_range_around_it(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked_a"].outcome()
    assert result.score_s is not None and result.score_low_s is not None and result.score_high_s is not None
    assert result.score_low_s <= result.score_s <= result.score_high_s


def test_a_correct_submission_passes_every_timed_mode_in_the_sandbox(runs: dict[str, HarnessRun]) -> None:
    for name in ("benchmark", "ranked_a", "profile"):
        result = runs[name].outcome()
        assert result.status is Status.PASSED, (name, result.verdict)
        assert "sandbox" in result.system.isolation, (name, result.system.isolation)


def test_a_crash_in_a_benchmark_names_it(runs: dict[str, HarnessRun]) -> None:
    result = runs["crash"].outcome()
    assert result.status is Status.CRASHED
    assert "benchmark 2 of 2" in result.verdict and "fails on large inputs" in result.verdict


def test_profile_mode_keeps_a_report_per_case(runs: dict[str, HarnessRun]) -> None:
    result = runs["profile"].outcome()
    assert result.status is Status.PASSED, result.verdict
    if "torch.profiler" in result.verdict:  # no GPU, or no ncu
        assert "aten::" in result.files["profile_0.txt"]
    else:
        assert "Nsight Compute" in result.verdict and "ncu_0.txt" in result.files


class _Work:
    """A leaderboard's flops()/bytes() as the harness sees them: 2 flops and 12 bytes per element."""

    def work(self, case: dict[str, int]) -> tuple[float, float]:
        return 2.0 * case["size"], 12.0 * case["size"]


def test_a_median_below_the_physical_floor_fails() -> None:
    problem: Any = _Work()
    case = CaseResult(case={"size": 10**9, "seed": 1}, passed=True, median_ns=1000.0)
    gpu = GpuInfo(name="H100", peak_bandwidth_gbps=3350.0, peak_tflops=989.0)
    with pytest.raises(RunEnded, match="below the physical floor"):
        benchmark.roofline(case, problem, case.case, gpu, "cuda", "benchmark 1 of 1")


def test_writes_that_fit_in_l2_do_not_count_towards_the_floor() -> None:
    problem: Any = _Work()
    case = CaseResult(case={"size": 10**6, "seed": 1}, passed=True, median_ns=1000.0)  # 12 MB in 1 µs
    gpu = GpuInfo(name="H100", peak_bandwidth_gbps=3350.0, peak_tflops=989.0)
    benchmark.roofline(case, problem, case.case, gpu, "cuda", "benchmark 1 of 1", l2_bytes=50 << 20)
    assert case.percent_of_peak is not None and case.percent_of_peak > 100


def test_roofline_figures_are_relative_to_the_gpu_peaks() -> None:
    problem: Any = _Work()
    size = 10**6
    case = CaseResult(case={"size": size, "seed": 1}, passed=True, median_ns=12e6 / 3000.0)  # 3 TB/s
    gpu = GpuInfo(name="H100", peak_bandwidth_gbps=3350.0, peak_tflops=989.0)
    benchmark.roofline(case, problem, case.case, gpu, "cuda", "benchmark 1 of 1")
    assert case.gbps == pytest.approx(3000.0)
    assert case.percent_of_peak == pytest.approx(100 * 3000 / 3350)
