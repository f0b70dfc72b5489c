"""A submission's process that dies while starting, before the ``load`` order (harness/children.py):
nothing of the submission's ran in it, so it is started once more per job where time allows and
the job's stderr says so. Through the real harness on the CPU, in its own process, with only the
start of chosen processes swapped for one that dies at once through the same spawn path (the
real failure, a CUDA or driver crash at start-up, nothing here provokes)."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import LEADERBOARDS, REPO, HarnessRun, leaderboard_spec, read_run, submission

from kernelcup.harness.children import MIN_RESTART_S
from kernelcup.harness.spec import JobSpec, Mode, Status

ADDMUL = LEADERBOARDS / "addmul"
SECRET = 1414213562373095048801688
DYING_STDERR = "kernelcup test: this process dies before it starts"

# ``python -m kernelcup.harness`` whose n-th start of a submission's process (argv[1]: the numbers
# that die; 1 is the job's first process, which the harness starts before it reads the spec)
# spawns a process that writes a line to stderr and exits with code 11 instead.
LAUNCHER = f"""
import sys
from kernelcup.harness import children, process, run
from kernelcup.harness.__main__ import _end_now, main

dying = {{int(n) for n in sys.argv[1].split(",") if n}}
real = children.start_python_child
starts = 0

def start(workspace, device):
    global starts
    starts += 1
    if starts not in dying:
        return real(workspace, device)
    command = [sys.executable, "-c", "import os, sys; sys.stderr.write({DYING_STDERR!r} + '\\\\n'); os._exit(11)"]
    env = process.child_environment(workspace.home, {{}})
    return process.spawn(command, workspace.work, workspace.identity, env, workspace.sandbox)

children.start_python_child = run.start_python_child = start
_end_now(main())
"""


def _run(spec: JobSpec, dying: str) -> HarnessRun:
    harness = subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, dying],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        stdout, stderr = harness.communicate(spec.to_json(), timeout=spec.timeout_s + 30)
    except subprocess.TimeoutExpired:
        harness.kill()
        harness.communicate()
        raise
    return read_run(stdout, stderr, harness.returncode, spec.result_key)


def _ranked() -> JobSpec:
    spec: JobSpec = leaderboard_spec(
        ADDMUL, submission("records_process.py"), Mode.RANKED, timeout_s=90, secret_seed=SECRET
    )
    return spec


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    jobs = {
        "round 1 once": (_ranked(), "2"),
        "round 1 twice": (_ranked(), "2,3"),
        "rounds 1 and 2": (_ranked(), "2,4"),
        "first": (leaderboard_spec(ADDMUL, submission("correct.py"), Mode.TEST, timeout_s=90), "1"),
        "first, no time": (leaderboard_spec(ADDMUL, submission("correct.py"), Mode.TEST, timeout_s=20), "1"),
    }
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = {name: pool.submit(_run, spec, dying) for name, (spec, dying) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def _note(why: str) -> str:
    return f"[kernelcup: the submission's process was started again after: {why}]\n"


def test_a_fresh_process_that_dies_before_it_loads_the_submission_is_started_once_more(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["round 1 once"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert result.stderr.startswith(
        _note("the submission's process exited with code 11 while starting (a fresh process for round 1)")
    )
    # The dead process's output is the job's, under its own name; the one started again says so.
    assert f"a fresh process for round 1]\n{DYING_STDERR}\n" in result.stderr
    assert "a fresh process for round 1, started again]" in result.stdout
    assert "a fresh process for round 2]" in result.stdout
    # Every process but the dead one imported the submission once; it is counted among them.
    imported = result.stdout.count("PROCESS pid=")
    assert imported >= 3 and f"[kernelcup: stdout of process 1 of {imported + 1}: the first process]" in result.stdout
    assert all(len(case.round_median_ns) >= 2 for case in result.benchmarks)


def test_a_process_started_again_that_dies_while_starting_ends_the_job_as_before(
    runs: dict[str, HarnessRun],
) -> None:
    result = runs["round 1 twice"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert result.verdict == (
        "the submission's process exited with code 11 while starting, in a fresh process started for round 1 "
        "of the benchmarks (the tests ran in another)"
    )
    assert result.stderr.startswith(
        _note("the submission's process exited with code 11 while starting (a fresh process for round 1)")
    )
    assert result.stderr.count(DYING_STDERR) == 2  # the one that died first and the one started again


def test_a_job_starts_a_process_again_only_once(runs: dict[str, HarnessRun]) -> None:
    result = runs["rounds 1 and 2"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert result.verdict.startswith("the submission's process exited with code 11 while starting, in a fresh ")
    assert "started for round 2 of the benchmarks" in result.verdict
    assert result.stderr.count("[kernelcup: the submission's process was started again after:") == 1
    assert "(a fresh process for round 1)]" in result.stderr


def test_a_first_process_that_dies_before_the_job_loads_is_started_once_more(runs: dict[str, HarnessRun]) -> None:
    result = runs["first"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert result.stderr.startswith(
        _note("the submission's process exited with code 11 while starting (the first process)")
    )
    assert f"[kernelcup: stderr of process 1 of 2: the first process]\n{DYING_STDERR}\n" in result.stderr
    assert len(result.tests) == 3 and all(test.passed for test in result.tests)


def test_a_process_is_not_started_again_without_the_time_for_it(runs: dict[str, HarnessRun]) -> None:
    assert MIN_RESTART_S > 20  # the job's whole budget
    result = runs["first, no time"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert result.verdict == "the submission's process exited with code 11 while starting"
    assert "started again" not in result.stderr and result.stderr == f"{DYING_STDERR}\n"
