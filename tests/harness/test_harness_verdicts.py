"""Every way a submission can end, through the real ``python -m kernelcup.harness`` on the CPU.

The runs are started together (a module fixture) and each test then states one behaviour.
"""

from __future__ import annotations

import pytest
from conftest import DEVICE, LEADERBOARDS, HarnessRun, leaderboard_spec, run_many, submission

from kernelcup.harness.spec import Status

ADDMUL = LEADERBOARDS / "addmul"
LENIENT = LEADERBOARDS / "lenient"
LEGACY = LEADERBOARDS / "legacy"

CASES = {
    "correct": (ADDMUL, "correct.py", 60),
    "wrong": (ADDMUL, "wrong.py", 60),
    "syntax_error": (ADDMUL, "syntax_error.py", 60),
    "missing_kernel": (ADDMUL, "missing_kernel.py", 60),
    "exits_on_import": (ADDMUL, "exits_on_import.py", 60),
    "raises": (ADDMUL, "raises.py", 60),
    "import_loop": (ADDMUL, "import_loop.py", 20),
    "infinite_loop": (ADDMUL, "infinite_loop.py", 20),
    "segfault": (ADDMUL, "segfault.py", 60),
    "os_exit": (ADDMUL, "os_exit.py", 60),
    "out_of_memory": (ADDMUL, "out_of_memory.py", 60),
    "nan_output": (LENIENT, "nan_output.py", 60),
    "unwritten_output": (LENIENT, "unwritten_output.py", 60),
    "partly_written": (LENIENT, "partly_written.py", 60),
    "wrong_shape": (ADDMUL, "wrong_shape.py", 60),
    "wrong_dtype": (ADDMUL, "wrong_dtype.py", 60),
    "dtype_the_check_accepts": (LENIENT, "wrong_dtype.py", 60),
    "not_a_tensor": (LENIENT, "not_a_tensor.py", 60),
    "tensor_subclass": (LENIENT, "tensor_subclass.py", 60),
    "huge_stdout": (ADDMUL, "huge_stdout.py", 60),
    "legacy_correct": (LEGACY, "correct.py", 60),
    "legacy_wrong": (LEGACY, "wrong.py", 60),
    "wild_cuda": (LEADERBOARDS / "wild_cuda", "correct.py", 60),
    "nondeterministic": (LEADERBOARDS / "nondeterministic", "correct.py", 60),
}


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    specs = {
        name: leaderboard_spec(folder, submission(source), "test", timeout_s=timeout)
        for name, (folder, source, timeout) in CASES.items()
    }
    batch: dict[str, HarnessRun] = run_many(specs)
    return batch


def test_a_correct_submission_passes_every_test(runs: dict[str, HarnessRun]) -> None:
    result = runs["correct"].outcome()
    assert result.status is Status.PASSED
    assert result.verdict == "all 3 tests passed"
    assert [t.passed for t in result.tests] == [True, True, True]


def test_a_correct_submission_passes_in_the_sandbox(runs: dict[str, HarnessRun]) -> None:
    result = runs["correct"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert "sandbox" in result.system.isolation, result.system.isolation


def test_progress_counts_the_tests(runs: dict[str, HarnessRun]) -> None:
    progress = runs["correct"].progress
    assert [(p.phase, p.done, p.total) for p in progress][-1] == ("testing", 3, 3)


def test_a_wrong_answer_names_the_first_failing_case_and_the_worst_element(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["wrong"].outcome()
    assert result.status is Status.FAILED
    assert result.verdict.startswith("test 1 of 3 (size=1, seed=11) failed")
    assert "got" in result.verdict and "expected" in result.verdict
    assert not any(t.passed for t in result.tests)


def test_a_syntax_error_is_a_compile_error_with_the_line(runs: dict[str, HarnessRun]) -> None:
    result = runs["syntax_error"].outcome()
    assert result.status is Status.COMPILE_ERROR
    assert "line 4" in result.verdict


def test_a_missing_custom_kernel_is_a_compile_error(runs: dict[str, HarnessRun]) -> None:
    result = runs["missing_kernel"].outcome()
    assert result.status is Status.COMPILE_ERROR
    assert "defines no custom_kernel" in result.verdict


def test_a_submission_that_exits_while_imported_is_told_so(runs: dict[str, HarnessRun]) -> None:
    result = runs["exits_on_import"].outcome()
    assert result.status is Status.COMPILE_ERROR
    assert result.verdict == (
        "could not load the submission: it called exit(0) while being imported, which would end the process that "
        "runs it; keep work at import to definitions and custom_kernel"
    )
    assert "SystemExit" in result.stderr  # where it was called, in its traceback


def test_an_exception_is_a_crash_naming_the_case_with_its_traceback_in_stderr(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["raises"].outcome()
    assert result.status is Status.CRASHED
    assert "test 1 of 3 (size=1, seed=11)" in result.verdict
    assert "deliberate failure inside custom_kernel" in result.verdict
    assert "Traceback" in result.stderr


def test_an_endless_import_times_out_while_loading(runs: dict[str, HarnessRun]) -> None:
    result = runs["import_loop"].outcome()
    assert result.status is Status.TIMED_OUT
    assert "while loading the submission" in result.verdict
    assert result.duration_s < 20 + 3


def test_an_endless_kernel_times_out_naming_the_case(runs: dict[str, HarnessRun]) -> None:
    result = runs["infinite_loop"].outcome()
    assert result.status is Status.TIMED_OUT
    assert "in test 1 of 3" in result.verdict
    assert result.duration_s < 20 + 3


def test_a_segfault_is_a_crash(runs: dict[str, HarnessRun]) -> None:
    result = runs["segfault"].outcome()
    assert result.status is Status.CRASHED
    assert "segmentation fault" in result.verdict and "test 1 of 3" in result.verdict


def test_os_exit_is_a_crash_with_the_exit_code(runs: dict[str, HarnessRun]) -> None:
    result = runs["os_exit"].outcome()
    assert result.status is Status.CRASHED
    assert "exited with code 3" in result.verdict


def test_out_of_memory_is_a_crash_that_says_so(runs: dict[str, HarnessRun]) -> None:
    # A real CPU out-of-memory would threaten the test machine; the submission raises
    # MemoryError instead, which is what torch raises on a failed CPU allocation.
    result = runs["out_of_memory"].outcome()
    assert result.status is Status.CRASHED
    assert "ran out of memory" in result.verdict


def test_nan_never_passes_even_when_the_leaderboard_check_would(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["nan_output"].outcome()
    assert result.status is Status.FAILED
    assert "NaN" in result.verdict


def test_an_unwritten_output_buffer_holds_nan_and_fails(runs: dict[str, HarnessRun]) -> None:
    result = runs["unwritten_output"].outcome()
    assert result.status is Status.FAILED
    assert "NaN" in result.verdict


def test_memory_the_submission_allocates_but_never_writes_reads_as_nan(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["partly_written"].outcome()
    assert result.status is Status.FAILED
    assert "NaN" in result.verdict


def test_a_shape_the_check_refuses_fails_with_both_shapes(runs: dict[str, HarnessRun]) -> None:
    result = runs["wrong_shape"].outcome()
    assert result.status is Status.FAILED
    assert "output has shape (1, 1), the reference (1,)" in result.verdict


def test_a_dtype_the_check_cannot_compare_fails_with_both_dtypes(runs: dict[str, HarnessRun]) -> None:
    result = runs["wrong_dtype"].outcome()
    assert result.status is Status.FAILED
    assert "check_implementation could not check the output" in result.verdict
    assert "torch.float64, the reference torch.float32" in result.verdict


def test_a_dtype_unlike_the_reference_passes_when_the_problem_check_accepts_it(
    runs: dict[str, HarnessRun],
) -> None:
    assert runs["dtype_the_check_accepts"].outcome().status is Status.PASSED


def test_an_output_that_is_not_a_tensor_fails(runs: dict[str, HarnessRun]) -> None:
    result = runs["not_a_tensor"].outcome()
    assert result.status is Status.FAILED
    assert "should be a torch.Tensor, got list" in result.verdict


def test_a_tensor_subclass_is_refused(runs: dict[str, HarnessRun]) -> None:
    result = runs["tensor_subclass"].outcome()
    assert result.status is Status.FAILED
    assert "tensor subclass" in result.verdict


def test_huge_stdout_is_capped_in_the_result_and_kept_as_a_file(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["huge_stdout"].outcome()
    assert result.status is Status.PASSED
    assert len(result.stdout) < 17 * 1024
    assert "truncated" in result.stdout
    assert "stdout.txt" in result.files
    assert "bytes dropped" in result.files["stdout.txt"]
    assert len(result.to_json()) < 2 * 1024 * 1024


def test_an_older_string_returning_check_passes_a_correct_submission(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["legacy_correct"].outcome()
    assert result.status is Status.PASSED


def test_an_older_string_returning_check_fails_with_its_message(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["legacy_wrong"].outcome()
    assert result.status is Status.FAILED
    assert "mismatch found" in result.verdict


@pytest.mark.skipif(DEVICE != "cpu", reason="on a GPU this problem simply runs")
def test_a_problem_that_hard_codes_cuda_is_a_clear_error_on_the_cpu(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["wild_cuda"].outcome()
    assert result.status is Status.ERROR
    assert "generate_input" in result.verdict


def test_a_non_deterministic_generate_input_is_a_leaderboard_error(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["nondeterministic"].outcome()
    assert result.status is Status.ERROR
    assert "not deterministic" in result.verdict


def test_every_run_ends_with_exactly_one_signed_result(runs: dict[str, HarnessRun]) -> None:
    for name, run in runs.items():
        assert run.result is not None, name
        assert run.returncode == 0, name
        assert run.lines[-1].startswith('{"event": "result"'), name
