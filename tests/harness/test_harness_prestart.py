"""Ranked rounds' processes started ahead, beside the first one (``Children.prestart``).

On a machine with cores to spare the processes of the three rounds start while the first one
starts and runs the tests; each is told to load the submission only when its round comes. Here
``KERNELCUP_HARNESS_PRESTART=1`` turns that on for a 2-core box: the same job must pass with one
process per round, each loading the submission once, and a submission that fails only in a later
process must still be named by its round.
"""

from __future__ import annotations

import re

from conftest import LEADERBOARDS, leaderboard_spec, run_harness, submission

from kernelcup.harness import benchmark
from kernelcup.harness.children import Children, Process
from kernelcup.harness.spec import Mode, Status

ADDMUL = LEADERBOARDS / "addmul"
SECRET = 1618033988749894848204586
PRESTART = {"KERNELCUP_HARNESS_PRESTART": "1", "KERNELCUP_HARNESS_CPUS": "off"}
BUDGET_S = 240  # generous: a 2-core box starts four processes at once here


def test_prestarted_rounds_each_load_the_submission_once_in_a_process_of_their_own() -> None:
    """The extra round (its process runs at a speed of its own, so the rounds disagree) is one of
    those started ahead too: a cold start in its place is seconds of every such ranked job."""
    spec = leaderboard_spec(
        ADDMUL, submission("speed_per_process.py"), Mode.RANKED, timeout_s=BUDGET_S, secret_seed=SECRET
    )
    run = run_harness(spec, env=PRESTART)
    result = run.outcome()
    assert result.status is Status.PASSED, result.verdict
    tokens = re.findall(r"^PROCESS .*token=([0-9a-f]+)$", result.stdout, re.MULTILINE)
    assert len(set(tokens)) == len(tokens)
    assert len(tokens) == 2 + benchmark.RANKED_ROUNDS, result.stdout  # the first, three rounds, the extra one
    for number in range(1, benchmark.RANKED_ROUNDS + 2):
        assert f"a fresh process for round {number}, started ahead" in result.stdout
    assert all("shared" not in case.message and "too little time" not in case.message for case in result.benchmarks)


def test_a_prestarted_process_that_fails_names_its_round() -> None:
    source = submission("fails_in_fresh_process.py").replace("@HOW@", "raise").replace("@MARKER@", "kcprestart")
    spec = leaderboard_spec(ADDMUL, source, Mode.RANKED, timeout_s=BUDGET_S, secret_seed=SECRET)
    result = run_harness(spec, env=PRESTART).outcome()
    assert result.status is not Status.PASSED
    assert "round 1 (in a fresh process)" in result.verdict and "broken in a later process" in result.verdict


def test_a_fresh_start_is_estimated_from_a_process_that_started_when_asked_not_one_started_ahead() -> None:
    """A round with no process started ahead for it (the extra round) starts from nothing: the
    estimate that decides whether it fits must be a cold start's, or the job runs out of time while
    that process starts (seen on an H200: 0.2 s adopted against 4.7 s cold)."""
    children = Children(None, None, None, deadline=0.0)  # type: ignore[arg-type]  # only its processes are read
    children.processes = [
        Process(None, None, started_for=0, startup_s=4.7),  # type: ignore[arg-type]
        Process(None, None, started_for=1, startup_s=0.2, ahead=True),  # type: ignore[arg-type]
        Process(None, None, started_for=2, startup_s=0.3, ahead=True),  # type: ignore[arg-type]
    ]
    assert children.startup_estimate() == 4.7
    children.processes.append(Process(None, None, started_for=4, startup_s=5.1))  # type: ignore[arg-type]
    assert children.startup_estimate() == 5.1
