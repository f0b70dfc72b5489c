"""The harness started ahead of its job (a runner's standby): the submission's process is up
before the spec arrives, knows nothing of the job until it is handed one, and never outlives it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from conftest import DEVICE, LEADERBOARDS, leaderboard_spec, read_run, start_harness, submission

from kernelcup.harness.process import children_of
from kernelcup.harness.spec import Result, Status

pytestmark = pytest.mark.timeout(120)


def _cmdline(pid: int) -> str:
    try:
        return (Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")).decode()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _started_harness() -> tuple[subprocess.Popen[str], int]:
    """``python -m kernelcup.harness`` with no spec yet, and its submission process once that is up."""
    harness = start_harness()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        child = next((pid for pid in children_of(harness.pid) if "kernelcup.harness.child" in _cmdline(pid)), None)
        if child is not None:
            return harness, child
        time.sleep(0.05)
    harness.kill()
    raise AssertionError("the harness started no submission process before its spec")


def _result(stdout: str, key: str) -> Result | None:
    result: Result | None = read_run(stdout, "", 0, key).result
    return result


def test_the_submission_process_is_up_before_the_spec_and_serves_it() -> None:
    harness, child = _started_harness()
    time.sleep(1.0)  # the job comes later than the standby
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("correct.py"))
    stdout, stderr = harness.communicate(spec.to_json(), timeout=90)
    result = _result(stdout, spec.result_key)
    assert result is not None, stderr
    assert result.status is Status.PASSED, result.verdict
    assert not _alive(child)


def test_the_standby_child_sees_no_job_until_it_is_handed_one() -> None:
    harness, child = _started_harness()
    try:
        environ = Path(f"/proc/{child}/environ").read_bytes().decode(errors="replace")
    except PermissionError:  # it runs as another user: even less to see
        environ = ""
    assert "TRITON_CACHE_DIR" not in environ and "TORCH_EXTENSIONS_DIR" not in environ
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("wrong.py"))
    stdout, _ = harness.communicate(spec.to_json(), timeout=90)
    result = _result(stdout, spec.result_key)
    assert result is not None and result.status is Status.FAILED


def test_a_spec_that_does_not_parse_ends_the_standby_child_too() -> None:
    harness, child = _started_harness()
    stdout, _ = harness.communicate("{not json", timeout=60)
    assert "bad job spec" in stdout
    assert not _alive(child)


def test_a_runner_that_goes_away_ends_the_standby() -> None:
    """The bot died before handing over a job: stdin closes empty, both processes end."""
    harness, child = _started_harness()
    assert harness.stdin is not None
    harness.stdin.close()
    harness.wait(timeout=60)
    time.sleep(0.2)
    assert not _alive(child)


@pytest.mark.skipif(DEVICE != "cpu", reason="on a GPU machine the standby child starts on the GPU")
def test_a_job_for_another_device_gets_a_process_started_for_it() -> None:
    """The standby started for the CPU here; a CUDA job replaces it and gets a clear verdict."""
    harness, child = _started_harness()
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("correct.py"), device="cuda")
    stdout, _ = harness.communicate(spec.to_json(), timeout=90)
    result = _result(stdout, spec.result_key)
    assert result is not None and result.status is Status.ERROR
    assert "CUDA is not available" in result.verdict
    assert "started again" not in result.stderr, result.stderr  # a second start would find no GPU either
    assert not _alive(child)
