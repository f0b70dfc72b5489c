"""Submissions that attack the harness: each attack fails, and the verdict stays honest."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import (
    DEVICE,
    LEADERBOARDS,
    REPO,
    HarnessRun,
    leaderboard_spec,
    run_harness,
    run_many,
    submission,
)

from harness import timing
from harness.spec import JobSpec, Mode, Result, Status, parse_line

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
    stdout = runs["hunter"].outcome().stdout
    assert "HUNTER: parent memory denied" in stdout or "HUNTER: parent memory unreadable" in stdout


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
    result = runs["tamper_inputs"].outcome()
    assert result.status is Status.FAILED
    assert "differ from the generated ones" in result.verdict


def test_monkey_patched_timers_do_not_change_the_measured_time() -> None:
    spec = leaderboard_spec(ADDMUL, submission("timer_patch.py"), Mode.BENCHMARK, timeout_s=60)
    result = run_harness(spec).outcome()
    assert result.status is Status.PASSED, result.verdict
    # It sleeps 2 ms per call on the host. On a GPU the events count GPU time, and the sleep
    # kernel before the call hides host time up to timing.MAX_SLEEP_NS of it.
    floor = 1.8e6 - (timing.MAX_SLEEP_NS if DEVICE == "cuda" else 0)
    for case in result.benchmarks:
        assert case.median_ns is not None and case.median_ns > floor


def test_tampering_with_the_harness_timer_object_fails_the_run() -> None:
    spec = leaderboard_spec(ADDMUL, submission("deep_timer_patch.py"), Mode.BENCHMARK, timeout_s=60)
    result = run_harness(spec).outcome()
    assert result.status is Status.FAILED
    assert "timer tampering" in result.verdict


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(path: Path, seconds: float) -> int:
    limit = time.monotonic() + seconds
    while time.monotonic() < limit:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


@pytest.fixture
def shared_dir(tmp_path: Path) -> Path:
    """A directory the submission's process can write to, whatever uid it runs as."""
    directory = tmp_path / "shared"
    directory.mkdir()
    directory.chmod(0o777)
    for parent in [tmp_path, *tmp_path.parents]:  # pytest's base is 0700: let others pass through
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)
    return directory


def _harness_env(tmp: Path) -> dict[str, str]:
    """The harness's temp files under pytest's tmp_path: a SIGKILLed harness cannot clean up."""
    return {**os.environ, "TMPDIR": str(tmp)}


def test_a_killed_harness_takes_the_submission_with_it(shared_dir: Path) -> None:
    pid_file = shared_dir / "child.pid"
    source = submission("records_pid_and_hangs.py").replace("@PID_FILE@", str(pid_file))
    spec = leaderboard_spec(ADDMUL, source, timeout_s=120)
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        cwd=REPO,
        text=True,
        env=_harness_env(shared_dir.parent),
    )
    assert harness.stdin is not None
    harness.stdin.write(spec.to_json())
    harness.stdin.close()
    child = _wait_for(pid_file, 60)
    assert _alive(child)
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    limit = time.monotonic() + 5
    while _alive(child) and time.monotonic() < limit:
        time.sleep(0.05)
    assert not _alive(child)


def test_sigterm_still_ends_with_a_signed_result(shared_dir: Path) -> None:
    pid_file = shared_dir / "child.pid"
    source = submission("records_pid_and_hangs.py").replace("@PID_FILE@", str(pid_file))
    spec = leaderboard_spec(ADDMUL, source, timeout_s=120)
    harness = subprocess.Popen(
        [sys.executable, "-m", "harness"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO,
        text=True,
        env=_harness_env(shared_dir.parent),
    )
    assert harness.stdin is not None
    harness.stdin.write(spec.to_json())
    harness.stdin.close()
    child = _wait_for(pid_file, 60)
    time.sleep(0.5)
    harness.send_signal(signal.SIGTERM)
    assert harness.stdout is not None
    stdout = harness.stdout.read()
    harness.wait(timeout=30)
    result = parse_line(stdout.splitlines()[-1], spec.result_key)
    assert isinstance(result, Result)
    assert result.status is Status.ERROR and "signal 15" in result.verdict
    assert not _alive(child)


def test_a_daemon_that_escapes_the_process_group_is_killed(shared_dir: Path) -> None:
    pid_file = shared_dir / "daemon.pid"
    source = submission("escape_grandchild.py").replace("@PID_FILE@", str(pid_file))
    result = run_harness(leaderboard_spec(ADDMUL, source, timeout_s=60)).outcome()
    assert result.status is Status.PASSED
    daemon = _wait_for(pid_file, 5)
    limit = time.monotonic() + 5
    while _alive(daemon) and time.monotonic() < limit:
        time.sleep(0.05)
    assert not _alive(daemon)


def test_a_spec_that_is_not_json_gets_a_signed_error() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "harness"],
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
        [sys.executable, "-m", "harness"],
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
