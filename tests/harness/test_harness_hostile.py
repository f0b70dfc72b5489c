"""Submissions that attack the harness: each attack fails, and the verdict stays honest."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from conftest import (
    DEVICE,
    LEADERBOARDS,
    REPO,
    HarnessRun,
    leaderboard_spec,
    processes_named,
    run_harness,
    run_many,
    submission,
)

from kernelcup.harness.spec import JobSpec, Mode, Result, Status, parse_line

ADDMUL = LEADERBOARDS / "addmul"
SECRET = 98765432109876543210123456789


SPECS: dict[str, JobSpec] = {}


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    SPECS.update(
        {
            "hunter": leaderboard_spec(
                ADDMUL, submission("secret_hunter.py"), Mode.RANKED, timeout_s=90, secret_seed=SECRET
            ),
            "forger": leaderboard_spec(ADDMUL, submission("forger.py"), timeout_s=60),
            "channel": leaderboard_spec(ADDMUL, submission("channel_tamper.py"), timeout_s=60),
            "tamper_inputs": leaderboard_spec(ADDMUL, submission("tamper_inputs.py"), timeout_s=60),
        }
    )
    batch: dict[str, HarnessRun] = run_many(SPECS)
    return batch


def _everything_the_user_sees(result: Result) -> str:
    return result.to_json()


def test_the_secret_seed_is_nowhere_the_submission_can_look(runs: dict[str, HarnessRun]) -> None:
    run = runs["hunter"]
    result = run.outcome()
    assert result.status is Status.PASSED, result.verdict
    seen = _everything_the_user_sees(result)
    assert "HUNTER: found" in seen
    assert str(SECRET) not in seen


def test_the_result_key_is_nowhere_the_submission_can_look(runs: dict[str, HarnessRun]) -> None:
    seen = _everything_the_user_sees(runs["hunter"].outcome())
    assert SPECS["hunter"].result_key not in seen


def test_the_submission_cannot_read_the_harness_memory(runs: dict[str, HarnessRun]) -> None:
    """The probe lists every process it can see and reads the memory of each it can open: the
    harness (``python -m kernelcup.harness``, which holds the seed and the key) is not among them,
    and nothing it read held the seed (``test_the_secret_seed_is_nowhere_the_submission_can_look``
    searches all of it)."""
    stdout = runs["hunter"].outcome().stdout
    seen = [line.split(": ", 2)[2] for line in stdout.splitlines() if line.startswith("HUNTER: sees pid ")]
    assert seen, stdout  # the probe ran and saw at least its own job's processes
    harness = [command for command in seen if command.rstrip().endswith("-m kernelcup.harness")]
    assert harness == [], seen
    assert str(SECRET) not in stdout


def test_without_the_sandbox_the_same_probe_sees_the_harness() -> None:
    """The control: the probe finds the harness where no PID namespace hides it, so the test above
    can fail."""
    spec = leaderboard_spec(ADDMUL, submission("secret_hunter.py"), Mode.TEST, timeout_s=90, secret_seed=SECRET)
    stdout = run_harness(spec, env={"KERNELCUP_HARNESS_SANDBOX": "off"}).outcome().stdout
    seen = [line for line in stdout.splitlines() if line.startswith("HUNTER: sees pid ")]
    assert any(line.rstrip().endswith("-m kernelcup.harness") for line in seen), seen


def test_forged_result_lines_change_nothing(runs: dict[str, HarnessRun]) -> None:
    run = runs["forger"]
    result = run.outcome()
    assert result.status is Status.FAILED  # the submission is wrong; its forgery must not help
    assert "FORGED" not in result.verdict
    assert "FORGER: harness stdout closed to us" in result.stdout
    assert run.rejected == []  # nothing reached the harness's stdout


def test_a_line_with_a_bad_mac_is_rejected(runs: dict[str, HarnessRun]) -> None:
    forged = next(line for line in runs["forger"].outcome().stdout.splitlines() if "FORGED" in line)
    with pytest.raises(Exception, match="bad MAC"):
        parse_line(forged, leaderboard_spec(ADDMUL, "").result_key)


def test_writing_to_the_harness_channel_fails_the_run(runs: dict[str, HarnessRun]) -> None:
    result = runs["channel"].outcome()
    assert result.status is Status.FAILED
    assert "private channel" in result.verdict or "out of turn" in result.verdict


def test_replacing_generate_input_in_the_submission_process_is_caught(
    runs: dict[str, HarnessRun],
) -> None:
    """Caught before the inputs are made: the leaderboard's module is watched
    (``harness/integrity.py``); where only the Problem's own reference to it is replaced, the
    inputs' fingerprint differs from the harness's."""
    result = runs["tamper_inputs"].outcome()
    assert result.status is Status.FAILED
    assert re.search(r"(reference\.generate_input|the problem\._generate) was replaced", result.verdict), result.verdict


def test_monkey_patched_timers_do_not_change_the_measured_time() -> None:
    spec = leaderboard_spec(ADDMUL, submission("timer_patch.py"), Mode.BENCHMARK, timeout_s=60)
    result = run_harness(spec).outcome()
    assert result.status is Status.PASSED, result.verdict
    # It sleeps 2 ms per call on the host before its kernel. On the CPU the host clock captured
    # before it was imported counts the sleep; on a GPU the time is the GPU's record, which no
    # Python clock feeds: the kernel alone, never the patched near-zero.
    for case in result.benchmarks:
        assert case.median_ns is not None
        assert case.median_ns > (1.8e6 if DEVICE == "cpu" else 500.0)


def test_tampering_with_the_harness_timer_object_fails_the_run() -> None:
    """It slows the clock of the timer object it finds up the call stack tenfold. The child's
    watch on its own objects catches the replaced clock before the next inputs are made
    (``harness/integrity.py``); behind it, on the CPU, the harness's own clock would catch the
    under-report (``benchmark._check_host_clock``), and on a GPU the record's ids, not a clock,
    mark the call."""
    spec = leaderboard_spec(ADDMUL, submission("deep_timer_patch.py"), Mode.BENCHMARK, timeout_s=60)
    result = run_harness(spec).outcome()
    assert result.status is Status.FAILED, result.verdict
    assert "the timer._now was replaced" in result.verdict


def test_an_output_written_after_the_call_returned_fails_a_timed_run() -> None:
    """The output is written when the harness frees the inputs, after the call's timing ended
    and before the harness reads it. Untimed modes cannot tell (the output is complete when
    read); a timed run compares what the output held right after the call with what it ships."""
    late = submission("late_writer.py")
    assert run_harness(leaderboard_spec(ADDMUL, late, timeout_s=60)).outcome().status is Status.PASSED
    for mode in (Mode.BENCHMARK, Mode.RANKED):
        result = run_harness(leaderboard_spec(ADDMUL, late, mode, timeout_s=90)).outcome()
        assert result.status is Status.FAILED, (mode, result.verdict)
        assert "still being written after custom_kernel returned" in result.verdict
        assert "timed call 1," in result.verdict  # the first timed call's output is always read


def test_outputs_filled_while_the_inputs_are_generated_fail_a_timed_run() -> None:
    """The submission wraps the child's generator so the output buffer is filled while the
    inputs are made (untimed), and its timed call does nothing. The child's watch on its own
    code catches the wrapper; behind it, the samples of every input tensor taken right after
    they are made would show the filled buffer when the harness checks a call."""
    prefill = submission("prefill_in_generate.py")
    result = run_harness(leaderboard_spec(ADDMUL, prefill, Mode.RANKED, timeout_s=90)).outcome()
    assert result.status is Status.FAILED, result.verdict
    # Caught where the generator is replaced (harness/integrity.py), before the samples of the
    # inputs would show the filled buffer.
    assert "kernelcup.harness.problem.Problem.generate was replaced" in result.verdict


@pytest.mark.parametrize(
    ("how", "named"),
    [("class", "kernelcup.harness.problem.Problem.generate"), ("instance", "the problem._generate")],
)
def test_answers_computed_while_the_inputs_are_made_fail_a_ranked_run(how: str, named: str) -> None:
    """The submission wraps the child's generator (the class's method, or the problem object's
    own reference to ``generate_input``) to compute each answer into a tensor of its own (no
    input changes) and returns it from a call that does nothing: it ranked 1.96 µs against
    honest code's 33.3 µs on the CPU before the child watched its own code
    (``harness/integrity.py``)."""
    cheat = submission("precompute_in_generate.py").replace("@HOW@", how)
    result = run_harness(leaderboard_spec(ADDMUL, cheat, Mode.RANKED, timeout_s=90)).outcome()
    assert result.status is Status.FAILED, result.verdict
    assert "changed the harness's own code" in result.verdict
    assert f"{named} was replaced" in result.verdict


def test_a_torch_function_mode_left_installed_fails_the_run() -> None:
    """A mode left on sees every torch call of the process, the input generator's included."""
    spy = submission("global_function_mode.py")
    result = run_harness(leaderboard_spec(ADDMUL, spy, Mode.BENCHMARK, timeout_s=90)).outcome()
    assert result.status is Status.FAILED, result.verdict
    assert "a torch function mode was left installed" in result.verdict


def test_a_profile_function_left_installed_fails_the_run() -> None:
    spy = submission("profile_function.py")
    result = run_harness(leaderboard_spec(ADDMUL, spy, timeout_s=60)).outcome()
    assert result.status is Status.FAILED, result.verdict
    assert "a trace or profile function was installed" in result.verdict


def test_the_operators_profiler_started_before_the_submission_is_not_held_against_it() -> None:
    """``KERNELCUP_HARNESS_PROFILE=1`` runs the submission's process under cProfile (a debugging
    aid of the operator's, bench/gpu/job_profile.py): that profiler was on before the submission
    was loaded, and its report comes back in the output."""
    honest = submission("records_process.py")
    profiled = {"KERNELCUP_HARNESS_PROFILE": "1"}
    result = run_harness(leaderboard_spec(ADDMUL, honest, timeout_s=60), env=profiled).outcome()
    assert result.status is Status.PASSED, result.verdict
    assert "function calls" in result.stdout


def test_honest_torch_compile_leaves_nothing_the_watch_holds_against_it() -> None:
    """Importing torch._dynamo replaces torch.manual_seed: the watch must not call that tampering."""
    compiled = submission("compiled.py")
    result = run_harness(leaderboard_spec(ADDMUL, compiled, Mode.BENCHMARK, timeout_s=240)).outcome()
    assert result.status is Status.PASSED, result.verdict


def _wait(check: Callable[[], bool], seconds: float) -> bool:
    limit = time.monotonic() + seconds
    while not check() and time.monotonic() < limit:
        time.sleep(0.05)
    return check()


def _hanging_job(marker: str, stdout: int | None) -> tuple[subprocess.Popen[str], str]:
    """A harness whose submission never returns, once that submission runs; and its key."""
    source = submission("records_pid_and_hangs.py").replace("@MARKER@", marker)
    spec = leaderboard_spec(ADDMUL, source, timeout_s=120)
    harness = subprocess.Popen(
        [sys.executable, "-m", "kernelcup.harness"], stdin=subprocess.PIPE, stdout=stdout, cwd=REPO, text=True
    )
    assert harness.stdin is not None
    harness.stdin.write(spec.to_json())
    harness.stdin.close()
    assert _wait(lambda: bool(processes_named(marker)), 60), "the submission never started"
    return harness, spec.result_key


def test_a_killed_harness_takes_the_submission_with_it() -> None:
    marker = f"kchang{secrets.token_hex(3)}"
    harness, _ = _hanging_job(marker, subprocess.DEVNULL)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    assert _wait(lambda: not processes_named(marker), 5)


def test_sigterm_still_ends_with_a_signed_result() -> None:
    marker = f"kcterm{secrets.token_hex(3)}"
    harness, key = _hanging_job(marker, subprocess.PIPE)
    time.sleep(0.5)
    harness.send_signal(signal.SIGTERM)
    assert harness.stdout is not None
    stdout = harness.stdout.read()
    harness.wait(timeout=30)
    result = parse_line(stdout.splitlines()[-1], key)
    assert isinstance(result, Result)
    assert result.status is Status.ERROR and "signal 15" in result.verdict
    assert _wait(lambda: not processes_named(marker), 5)


def test_a_daemon_that_escapes_the_process_group_is_killed() -> None:
    marker = f"kcdaemon{secrets.token_hex(3)}"
    source = submission("escape_grandchild.py").replace("@MARKER@", marker)
    result = run_harness(leaderboard_spec(ADDMUL, source, timeout_s=60)).outcome()
    assert result.status is Status.PASSED
    assert "daemon started" in result.stdout
    assert _wait(lambda: not processes_named(marker), 5)


def test_a_spec_that_is_not_json_gets_a_signed_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "kernelcup.harness"],
        input="not json",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    result = parse_line(completed.stdout.splitlines()[-1], "")
    assert isinstance(result, Result)
    assert result.status is Status.ERROR and "bad job spec" in result.verdict


def test_a_spec_of_another_version_gets_a_signed_error() -> None:
    spec = leaderboard_spec(ADDMUL, submission("correct.py"))
    raw = json.loads(spec.to_json())
    raw["version"] = 99
    completed = subprocess.run(
        [sys.executable, "-m", "kernelcup.harness"],
        input=json.dumps(raw),
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    result = parse_line(completed.stdout.splitlines()[-1], spec.result_key)
    assert isinstance(result, Result)
    assert result.status is Status.ERROR and "version" in result.verdict


def test_the_child_environment_holds_nothing_of_the_runner() -> None:
    spec = leaderboard_spec(
        ADDMUL,
        "import os\nprint('ENV', sorted(os.environ))\n" + submission("correct.py"),
        timeout_s=60,
    )
    run = run_harness(spec, env={"MODAL_TOKEN_SECRET": "do-not-leak", "KERNELCUP_DB": "x"})
    result = run.outcome()
    assert result.status is Status.PASSED
    assert "MODAL_TOKEN_SECRET" not in result.stdout and "KERNELCUP_DB" not in result.stdout
    assert os.environ.get("PATH") is not None


def test_a_thread_a_leaderboards_check_leaves_running_neither_holds_the_result_back_nor_writes_after_it() -> None:
    """The check starts a non-daemon thread that would print a result line an hour later. The
    runner reads the harness's output to its end, so the harness ends its process once its result
    is written (harness/__main__.py): the job ends now, with one result line and nothing after."""
    spec = leaderboard_spec(LEADERBOARDS / "lingering", submission("correct.py"), timeout_s=60)
    run = run_harness(spec, wall_limit_s=90)  # a normal interpreter exit would wait an hour for the thread
    assert run.outcome().status is Status.PASSED, run.outcome().verdict
    assert run.returncode == 0 and not run.rejected
