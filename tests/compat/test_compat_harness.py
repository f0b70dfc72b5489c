"""GPU MODE's classes of problems, each through the real ``python -m kernelcup.harness`` (README.md).

The runs start together (a module fixture, three at a time); each test states one behaviour.
With ``KERNELCUP_TEST_DEVICE=cuda`` (the GPU script) the same runs happen on a GPU, plus the
honest patterns only a GPU has: torch.compile in three modes and a hand-captured CUDA graph.
"""

from __future__ import annotations

import pytest

from kernelcup.harness.spec import JobSpec, Mode, Result, Status
from tests.compat.support import compat_spec, submission
from tests.harness.conftest import DEVICE, HarnessRun, run_many

SECRET = 987654321123
NO_KERNEL = "def custom_kernel(data):\n    return data\n"
GPU_PATTERNS = ("compiled_default", "compiled_reduce_overhead", "compiled_max_autotune", "cuda_graph")


def _specs() -> dict[str, JobSpec]:
    specs = {
        "wide": compat_spec("wide_reference", submission("running_sum")),
        "wide_wrong": compat_spec("wide_reference", submission("running_sum_shifted")),
        "wide_benchmark": compat_spec("wide_reference", submission("running_sum"), Mode.BENCHMARK),
        "loop_ranked": compat_spec("host_time", submission("loop_of_launches"), Mode.RANKED, secret_seed=SECRET),
        "item": compat_spec("host_time", submission("item_per_call"), Mode.BENCHMARK),
        "missing_package": compat_spec("host_time", submission("imports_a_missing_package")),
        "needs_package": compat_spec("needs_package", NO_KERNEL),
        "cuda_only": compat_spec("cuda_only", submission("add_once")),
        "global_rng_ranked": compat_spec("global_rng", submission("scale"), Mode.RANKED, secret_seed=SECRET),
        "own": compat_spec("own_evaluator", submission("scale_rows")),
        "own_wrong": compat_spec("own_evaluator", submission("scale_rows_wrong")),
        "own_missing": compat_spec("own_evaluator", submission("scale_rows_missing")),
        "own_benchmark": compat_spec("own_evaluator", submission("scale_rows"), Mode.BENCHMARK),
        "own_ranked": compat_spec("own_evaluator", submission("scale_rows"), Mode.RANKED, secret_seed=SECRET),
        "own_profile": compat_spec("own_evaluator", submission("scale_rows"), Mode.PROFILE),
        "hungry": compat_spec("hungry_memory", submission("hungry_call"), Mode.BENCHMARK),
    }
    if DEVICE == "cuda":
        for name in GPU_PATTERNS:
            specs[name] = compat_spec("host_time", submission(name), Mode.RANKED, secret_seed=SECRET, timeout_s=240)
    return specs


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    batch: dict[str, HarnessRun] = run_many(_specs())
    return batch


@pytest.fixture(scope="module")
def sleep_run(runs: dict[str, HarnessRun]) -> HarnessRun:
    """The host sleep's job alone, after the batch: on a GPU another job's kernels delay the
    timer's launch-hiding sleep kernel, and with it the start event, so more of the host's sleep
    falls before the start than the sleep's own length (on two H100s this test failed with three
    jobs sharing its GPU; in production a GPU runs one job)."""
    return run_many({"sleep": compat_spec("host_time", submission("host_sleep"), Mode.BENCHMARK)})["sleep"]


def _passed(run: HarnessRun) -> Result:
    result = run.outcome()
    assert result.status is Status.PASSED, result.verdict
    return result


# --- a reference wider than the output buffer ----------------------------------------------


def test_a_float32_output_passes_a_float64_reference_when_the_problem_check_accepts_it(
    runs: dict[str, HarnessRun],
) -> None:
    assert _passed(runs["wide"]).verdict == "all 3 tests passed"


def test_the_problem_check_still_fails_a_wrong_answer_with_its_own_message(runs: dict[str, HarnessRun]) -> None:
    result = runs["wide_wrong"].outcome()
    assert result.status is Status.FAILED
    assert "sums are off by more than" in result.verdict


def test_a_problem_naming_no_ranking_is_ranked_by_its_last_benchmark(runs: dict[str, HarnessRun]) -> None:
    result = _passed(runs["wide_benchmark"])
    assert "last of 2 benchmark medians" in result.verdict
    assert result.score_s == pytest.approx((result.benchmarks[-1].median_ns or 0) * 1e-9)


# --- honest host time ----------------------------------------------------------------------


def test_a_python_loop_of_fifty_launches_passes_ranked(runs: dict[str, HarnessRun]) -> None:
    _passed(runs["loop_ranked"])


def test_an_item_per_call_passes(runs: dict[str, HarnessRun]) -> None:
    _passed(runs["item"])


def test_a_host_sleep_inside_the_call_passes_and_counts_in_the_time(sleep_run: HarnessRun) -> None:
    result = _passed(sleep_run)
    # On the CPU the host clock counts the sleep. On a GPU the time runs from the call's first
    # GPU activity: host work before it is not GPU work (harness/timing.py).
    if DEVICE == "cpu":
        assert all((case.median_ns or 0) >= 0.95 * 4e6 for case in result.benchmarks)
    else:
        assert all(0 < (case.median_ns or 0) < 4e6 for case in result.benchmarks)


@pytest.mark.skipif(DEVICE != "cuda", reason="torch.compile and CUDA graphs are GPU patterns")
@pytest.mark.parametrize("name", GPU_PATTERNS)
def test_compiled_and_graph_submissions_pass_ranked(runs: dict[str, HarnessRun], name: str) -> None:
    _passed(runs[name])


# --- a package this machine lacks ----------------------------------------------------------


def test_a_submission_importing_a_missing_package_gets_one_clear_line(runs: dict[str, HarnessRun]) -> None:
    result = runs["missing_package"].outcome()
    assert result.status is Status.COMPILE_ERROR
    assert result.verdict == (
        "could not load the submission: it imports the Python package 'kernelcup_absent_package', "
        "which is not installed on this machine"
    )


def test_a_reference_needing_a_missing_package_is_a_leaderboard_error_in_one_line(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["needs_package"].outcome()
    assert result.status is Status.ERROR
    assert "reference.py cannot run here: it imports the Python package 'kernelcup_absent_package'" in result.verdict
    assert "\n" not in result.verdict and "Traceback" not in result.verdict


# --- a generator drawing from the global RNG -----------------------------------------------


def test_a_generator_drawing_from_the_global_rngs_passes_ranked(runs: dict[str, HarnessRun]) -> None:
    _passed(runs["global_rng_ranked"])


# --- a leaderboard with its own evaluator --------------------------------------------------


def test_an_own_evaluator_runs_the_tests_with_the_public_seeds(runs: dict[str, HarnessRun]) -> None:
    result = _passed(runs["own"])
    assert result.verdict == "all 2 tests passed"
    assert "seeds: 5,6 POPCORN_SEED: None" in result.stdout


def test_an_own_evaluator_failure_names_the_case_and_its_message(runs: dict[str, HarnessRun]) -> None:
    result = runs["own_wrong"].outcome()
    assert result.status is Status.FAILED
    assert result.verdict.startswith("test 1 of 2 (rows: 4; cols: 8; seed: 5) failed: scale_rows differs")


def test_an_own_evaluator_error_before_any_test_is_the_verdict(runs: dict[str, HarnessRun]) -> None:
    result = runs["own_missing"].outcome()
    assert result.status is Status.FAILED
    assert "cannot use the submission: AttributeError" in result.verdict


def test_an_own_evaluator_times_every_benchmark(runs: dict[str, HarnessRun]) -> None:
    result = _passed(runs["own_benchmark"])
    assert [case.runs for case in result.benchmarks] == [20, 20]
    assert all((case.median_ns or 0) > 0 for case in result.benchmarks)
    assert "geom of 2 benchmark medians" in result.verdict


def test_ranked_seeds_reach_an_own_evaluator_only_through_its_cases_file(runs: dict[str, HarnessRun]) -> None:
    result = _passed(runs["own_ranked"])
    lines = [line for line in result.stdout.splitlines() if line.startswith("seeds:")]
    assert len(lines) == 2  # the tests, then every benchmark in one leaderboard run
    assert all(line.endswith("POPCORN_SEED: None") for line in lines)
    assert "seeds: 5,6 " not in result.stdout and "seeds: 7,8 " not in result.stdout  # derived, not public
    assert str(SECRET) not in result.stdout + result.stderr


def test_an_own_evaluator_profile_comes_back_as_files(runs: dict[str, HarnessRun]) -> None:
    result = _passed(runs["own_profile"])
    assert "scale_rows" in result.files["profile_0.txt"] and "profile_1.txt" in result.files


def test_every_compat_run_ends_with_one_signed_result(runs: dict[str, HarnessRun]) -> None:
    for name, run in runs.items():
        assert run.result is not None, f"{name}: {run.stderr[-2000:]}"
        assert not run.rejected, name


# --- a reference that makes its inputs on "cuda" ---------------------------------------------


@pytest.mark.skipif(DEVICE != "cpu", reason="on a GPU the reference runs")
def test_a_reference_that_needs_cuda_says_so_in_one_line_on_the_cpu(runs: dict[str, HarnessRun]) -> None:
    result = runs["cuda_only"].outcome()
    assert result.status is Status.ERROR
    assert result.verdict.startswith("this leaderboard's generate_input needs a CUDA GPU and this run is on the CPU (")
    assert "\n" not in result.verdict and len(result.verdict) < 300


@pytest.mark.skipif(DEVICE != "cuda", reason="needs a GPU")
def test_a_reference_that_makes_its_inputs_on_cuda_runs_on_a_gpu(runs: dict[str, HarnessRun]) -> None:
    _passed(runs["cuda_only"])


# --- a check and a submission that each need most of the GPU ------------------------------


def test_the_memory_a_check_used_is_the_submissions_again_before_its_next_timed_call(
    runs: dict[str, HarnessRun],
) -> None:
    """On a GPU, the first case's check takes 60% of its memory in the harness's process and the
    second case's calls take 50% in the submission's: both fit only if the harness hands its
    cache back after the check (on the CPU the shares are a MiB)."""
    result = _passed(runs["hungry"])
    assert len(result.benchmarks) == 2 and all(case.median_ns for case in result.benchmarks)
