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
from kernelcup.harness.spec import Mode, Status

ADDMUL = LEADERBOARDS / "addmul"
SECRET = 1618033988749894848204586
PRESTART = {"KERNELCUP_HARNESS_PRESTART": "1", "KERNELCUP_HARNESS_CPUS": "off"}
BUDGET_S = 240  # generous: a 2-core box starts four processes at once here


def test_prestarted_rounds_each_load_the_submission_once_in_a_process_of_their_own() -> None:
    spec = leaderboard_spec(
        ADDMUL, submission("records_process.py"), Mode.RANKED, timeout_s=BUDGET_S, secret_seed=SECRET
    )
    run = run_harness(spec, env=PRESTART)
    result = run.outcome()
    assert result.status is Status.PASSED, result.verdict
    tokens = re.findall(r"^PROCESS .*token=([0-9a-f]+)$", result.stdout, re.MULTILINE)
    assert len(set(tokens)) == len(tokens)
    assert len(tokens) in (1 + benchmark.RANKED_ROUNDS, 2 + benchmark.RANKED_ROUNDS)  # a 4th round where split
    assert all("shared" not in case.message and "too little time" not in case.message for case in result.benchmarks)


def test_a_prestarted_process_that_fails_names_its_round() -> None:
    source = submission("fails_in_fresh_process.py").replace("@HOW@", "raise").replace("@MARKER@", "kcprestart")
    spec = leaderboard_spec(ADDMUL, source, Mode.RANKED, timeout_s=BUDGET_S, secret_seed=SECRET)
    result = run_harness(spec, env=PRESTART).outcome()
    assert result.status is not Status.PASSED
    assert "round 1 (in a fresh process)" in result.verdict and "broken in a later process" in result.verdict
