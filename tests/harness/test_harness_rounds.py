"""Ranked rounds, each in a fresh submission process (harness/children.py), through the real
harness on the CPU; and the arithmetic of rounds and budgets."""

from __future__ import annotations

import itertools
import json
import math
import re
import secrets
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

from kernelcup.harness import benchmark, cpus, stats
from kernelcup.harness.children import FRESH_MAX_SHARE, fresh_fits, time_share
from kernelcup.harness.process import StreamCapture
from kernelcup.harness.reporting import SHOWN_OUTPUT, attach_process_outputs
from kernelcup.harness.rounds import NEXT_ROUND_MARGIN
from kernelcup.harness.run import reserve_s
from kernelcup.harness.session import Timed
from kernelcup.harness.spec import GpuInfo, Mode, Result, Status, parse_line

ADDMUL = LEADERBOARDS / "addmul"
SECRET = 2718281828459045235360287
MARKERS = {how: f"kcfr{how[:2]}{secrets.token_hex(3)}" for how in ("raise", "exit", "hang")}
SLOW_LOAD_S = 1.5
# Only a backstop: every harness run here ends within its own limit (run_harness's wall limit),
# and the limits grow with the start-ups measured on the box, so the batch of jobs that the first
# test's setup runs takes several minutes on a loaded one (3.5 on a 2-core box beside two busy
# loops), past the project's 300 s.
pytestmark = pytest.mark.timeout(1200)
# On a GPU, one job at a time, as the runner runs them (one job per GPU). Three of these jobs
# side by side on one H100 failed the benchmark job as timer tampering (872 µs per call that the
# harness's clock saw and the child's did not): each starts fresh processes mid-run, whose CUDA
# start-up lands among a neighbour's timed calls.
WORKERS = 1 if DEVICE == "cuda" else 3
# How much slower than measured a job's start-ups may run and still fit its budget: the load of
# a shared box changes while this module runs (other test files beside it, the batch's own jobs
# starting and ending).
SLACK = 3.0


@dataclass(frozen=True)
class StartUp:
    """What a ranked job needs before and between its rounds on this box, as measured on
    test-mode jobs of the same leaderboard: ``first_s`` from the spec's arrival to the end of the
    tests; ``startup_s`` for a fresh process, as the harness estimates it from the first (its
    own start-up as it reports it, and loading the submission); ``harness_s``, what a job's wall
    time holds beyond its own clock (the harness starting before it reads the spec, and ending)."""

    first_s: float
    startup_s: float
    harness_s: float = 0.0

    def times(self, factor: float) -> StartUp:
        return StartUp(self.first_s * factor, self.startup_s * factor, self.harness_s * factor)

    def loading(self, seconds: float) -> StartUp:
        """For a submission that takes ``seconds`` longer to import, in every process."""
        return StartUp(self.first_s + seconds, self.startup_s + seconds, self.harness_s)

    @property
    def overhead_s(self) -> float:
        """A job's wall time beyond its limit, with SLACK; never less than run_harness's own."""
        return max(30.0, SLACK * self.harness_s)


def measure_startup(folder: Path, source: str, side_by_side: int = 1) -> StartUp:
    """The worst of ``side_by_side`` test-mode jobs run at once (as the jobs measured for run)."""
    specs = {f"probe {i}": leaderboard_spec(folder, source, Mode.TEST) for i in range(side_by_side)}
    began = time.monotonic()
    results = [run.outcome() for run in run_many(specs, workers=side_by_side).values()]
    wall_s = time.monotonic() - began
    phases = [result.phases_s for result in results]
    return StartUp(
        max(p["ready"] + p["tests"] for p in phases),
        max(p["process start-up"] + p["submission load"] for p in phases),
        wall_s - min(result.duration_s for result in results),
    )


def fresh_rounds(budget_s: float, box: StartUp, cases: int) -> int:
    """How many ranked rounds, from the first, get a fresh process in a job of ``budget_s``, by
    harness/run.py's rules: a start-up only where it takes at most ``FRESH_MAX_SHARE`` of the
    time left (``fresh_fits``), each case timed for its share of what is left beyond the
    start-ups still to come (``time_share``), here spent whole."""
    rounds = benchmark.RANKED_ROUNDS
    left = budget_s - reserve_s(budget_s) - box.first_s
    for round_index in range(rounds):
        if not fresh_fits(left, box.startup_s):
            return round_index
        left -= box.startup_s
        for case in range(cases):
            slots_left = rounds * cases - (round_index * cases + case)
            left -= time_share(left, slots_left, rounds - 1 - round_index, box.startup_s)
    return rounds


def least_budget(box: StartUp, fresh: int, cases: int = 2) -> float:
    """The least ``timeout_s`` whose job starts a fresh process for each of its first ``fresh``
    rounds (:func:`fresh_rounds`), to a hundredth of a second."""
    low, high = box.first_s, box.first_s + 2.0
    while fresh_rounds(high, box, cases) < fresh:
        low, high = high, 2 * high
    while high - low > 0.01:
        middle = (low + high) / 2
        low, high = (low, middle) if fresh_rounds(middle, box, cases) >= fresh else (middle, high)
    return high


@dataclass(frozen=True)
class Budgets:
    """The ``timeout_s`` of each job below, from the start-ups measured on this box."""

    fresh_round: float  # a fresh process for round 1, with SLACK (the hung job runs to it)
    ranked: float  # a fresh process for every round, with SLACK
    tight: float  # a slow loader: room for one round's fresh process, not for the next
    overhead_s: float  # a job's wall time beyond its limit (StartUp.overhead_s)


@pytest.fixture(scope="module")
def budgets() -> Budgets:
    box = measure_startup(ADDMUL, submission("records_process.py"), side_by_side=WORKERS)
    slow = box.loading(SLOW_LOAD_S)
    tight = (least_budget(slow, 1) + least_budget(slow, 2)) / 2  # no slack: tight wherever it runs
    return Budgets(
        fresh_round=math.ceil(least_budget(box.times(SLACK), 1)),
        ranked=math.ceil(least_budget(box.times(SLACK), benchmark.RANKED_ROUNDS)),
        tight=math.ceil(tight),
        overhead_s=box.overhead_s,
    )


def _fails_later(how: str) -> str:
    source: str = submission("fails_in_fresh_process.py")
    return source.replace("@HOW@", how).replace("@MARKER@", MARKERS[how])


@pytest.fixture(scope="module")
def runs(budgets: Budgets) -> dict[str, HarnessRun]:
    specs = {
        # It runs to its time limit, so it starts first.
        "hang": leaderboard_spec(
            ADDMUL, _fails_later("hang"), Mode.RANKED, timeout_s=budgets.fresh_round, secret_seed=SECRET
        ),
        "ranked": leaderboard_spec(
            ADDMUL, submission("records_process.py"), Mode.RANKED, timeout_s=budgets.ranked, secret_seed=SECRET
        ),
        "benchmark": leaderboard_spec(ADDMUL, submission("records_process.py"), Mode.BENCHMARK, timeout_s=60),
        "raise": leaderboard_spec(
            ADDMUL, _fails_later("raise"), Mode.RANKED, timeout_s=budgets.fresh_round, secret_seed=SECRET
        ),
        "exit": leaderboard_spec(
            ADDMUL, _fails_later("exit"), Mode.RANKED, timeout_s=budgets.fresh_round, secret_seed=SECRET
        ),
        "slow": leaderboard_spec(
            ADDMUL,
            submission("slow_to_load.py").replace("@SLEEP@", str(SLOW_LOAD_S)),
            Mode.RANKED,
            timeout_s=budgets.tight,
            secret_seed=SECRET,
        ),
    }
    batch: dict[str, HarnessRun] = run_many(specs, workers=WORKERS, overhead_s=budgets.overhead_s)
    return batch


def _tokens(stdout: str) -> list[str]:
    return re.findall(r"^PROCESS .*token=([0-9a-f]+)$", stdout, re.MULTILINE)


def test_each_ranked_round_runs_in_a_fresh_process(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked"].outcome()
    assert result.status is Status.PASSED, result.verdict
    tokens = _tokens(result.stdout)
    assert len(tokens) >= 2 and len(set(tokens)) == len(tokens)  # one import per process
    # Each process's output is marked as its own.
    assert "[kernelcup: stdout of process 1 of" in result.stdout
    assert "a fresh process for round 1]" in result.stdout and "a fresh process for round 2]" in result.stdout


def test_no_ranked_round_runs_in_the_process_that_ran_the_tests(runs: dict[str, HarnessRun]) -> None:
    """Every round starts alike: in its own process, never after the tests in theirs."""
    result = runs["ranked"].outcome()
    tokens = _tokens(result.stdout)
    assert len(tokens) == 1 + benchmark.RANKED_ROUNDS or len(tokens) == 2 + benchmark.RANKED_ROUNDS  # a third round
    first = result.stdout.split("[kernelcup: stdout of ")[1]
    assert first.startswith("process 1 of") and "the first process" in first.splitlines()[0]


def test_every_process_of_a_ranked_job_times_on_the_one_core_chosen(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked"].outcome()
    chosen = cpus.timing_cpus() if DEVICE == "cuda" else None  # the harness's environment is this one's
    if chosen is None:  # the CPU, or a machine under 4 cores: never pinned, so nothing to say
        assert result.system.timing_cores == ""
        return
    # One line for every process: each read its own timing thread's cores back as this one core.
    assert result.system.timing_cores == cpus.describe([chosen[1]], chosen[0])


def test_a_job_says_where_its_time_went(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked"].outcome()
    assert result.status is Status.PASSED, result.verdict
    phases = result.phases_s
    parts = {"process start-up", "submission load", "first test", "ending the processes", "sandbox and build caches"}
    assert set(phases) == {"ready", "tests", "benchmarks", "closing"} | parts
    assert all(seconds >= 0 for seconds in phases.values())
    assert phases["submission load"] <= phases["ready"] and phases["first test"] <= phases["tests"]
    assert phases["ending the processes"] + phases["sandbox and build caches"] <= phases["closing"] + 0.002
    assert phases["benchmarks"] > phases["tests"]  # three rounds, fresh processes, against 3 small tests
    spent = phases["ready"] + phases["tests"] + phases["benchmarks"] + phases["closing"]
    assert spent == pytest.approx(result.duration_s, abs=0.01)


def test_benchmark_mode_keeps_one_round_in_one_process(runs: dict[str, HarnessRun]) -> None:
    result = runs["benchmark"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert len(_tokens(result.stdout)) == 1
    assert "[kernelcup:" not in result.stdout  # a single process's output stays as it was
    assert all(case.round_median_ns == [] for case in result.benchmarks)


def test_a_ranked_case_carries_its_rounds_medians_inside_its_interval(runs: dict[str, HarnessRun]) -> None:
    result = runs["ranked"].outcome()
    for case in result.benchmarks:
        # One more where they disagree; one left out where it ran in a slow spell.
        assert benchmark.RANKED_ROUNDS - 1 <= len(case.round_median_ns) <= benchmark.RANKED_ROUNDS + 1
        assert case.median_ns == pytest.approx(statistics.mean(case.round_median_ns))
        assert case.ci_low_ns is not None and case.ci_high_ns is not None
        assert case.ci_low_ns <= min(case.round_median_ns) and max(case.round_median_ns) <= case.ci_high_ns
        assert "process" not in case.message  # every round had its own: nothing to say


def test_an_exception_in_a_fresh_process_names_its_round(runs: dict[str, HarnessRun]) -> None:
    result = runs["raise"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert "round 1 (in a fresh process)" in result.verdict and "broken in a later process" in result.verdict
    assert len(result.tests) == 3 and all(test.passed for test in result.tests)
    assert "PROCESS later=False" in result.stdout and "PROCESS later=True" in result.stdout


def test_a_fresh_process_that_dies_while_loading_is_a_crash_naming_its_round(runs: dict[str, HarnessRun]) -> None:
    result = runs["exit"].outcome()
    assert result.status is Status.CRASHED, result.verdict
    assert "exited with code 3 while loading the submission" in result.verdict
    assert "in a fresh process started for round 1 of the benchmarks (the tests ran in another)" in result.verdict


def test_a_fresh_process_that_dies_while_loading_is_not_started_again(runs: dict[str, HarnessRun]) -> None:
    """It died importing the submission: the submission's verdict, though time was left to start
    another (one that dies before ``load`` is, tests/harness/test_harness_restart.py)."""
    result = runs["exit"].outcome()
    assert "started again" not in result.stdout + result.stderr
    assert "[kernelcup: stdout of process 2 of 2: a fresh process for round 1]\nPROCESS later=True" in result.stdout


def test_a_fresh_process_that_never_loads_times_out_naming_its_round(
    runs: dict[str, HarnessRun], budgets: Budgets
) -> None:
    result = runs["hang"].outcome()
    assert result.status is Status.TIMED_OUT, result.verdict
    assert "while loading the submission, in a fresh process started for round 1" in result.verdict
    assert result.duration_s < budgets.fresh_round


def test_no_process_of_a_job_outlives_it(runs: dict[str, HarnessRun]) -> None:
    for how, marker in MARKERS.items():
        assert runs[how].result is not None
        assert _wait(_gone(marker), 5), how


def test_a_slow_loading_submission_on_a_tight_budget_ends_within_it(
    runs: dict[str, HarnessRun], budgets: Budgets
) -> None:
    run = runs["slow"]
    result = run.outcome()
    assert "harness error" not in result.verdict and "Traceback" not in run.stderr
    assert result.status in (Status.PASSED, Status.TIMED_OUT), result.verdict
    assert result.duration_s < budgets.tight  # every start-up was paid for within the budget
    if result.status is Status.TIMED_OUT:
        assert result.verdict.startswith(f"timed out after {budgets.tight:.0f} s")
        return
    processes = len(_tokens(result.stdout))
    rounds = max(len(case.round_median_ns) for case in result.benchmarks)
    assert processes >= 1
    fitted = re.search(rf"timed in (\d) rounds? of {benchmark.RANKED_ROUNDS}", result.verdict)
    if fitted:  # a loaded box: the rounds that did not fit are named, never a failure
        assert 1 <= int(fitted.group(1)) < benchmark.RANKED_ROUNDS
        return
    assert rounds >= benchmark.RANKED_ROUNDS - 1  # one may be left out as a slow spell
    if processes < benchmark.RANKED_ROUNDS:  # no time for a fresh one: said so, not failed
        assert all("too little time was left to start a fresh one" in case.message for case in result.benchmarks)


def test_sigterm_while_a_fresh_process_loads_ends_every_process(budgets: Budgets) -> None:
    marker = f"kcfrtm{secrets.token_hex(3)}"
    source = submission("fails_in_fresh_process.py").replace("@HOW@", "hang").replace("@MARKER@", marker)
    spec = leaderboard_spec(ADDMUL, source, Mode.RANKED, timeout_s=budgets.fresh_round, secret_seed=SECRET)
    harness = subprocess.Popen(
        [sys.executable, "-m", "kernelcup.harness"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=REPO, text=True
    )
    assert harness.stdin is not None and harness.stdout is not None
    harness.stdin.write(spec.to_json())
    harness.stdin.close()
    # Started within the job's limit, once the harness has read the spec, or never.
    started = _wait(lambda: bool(processes_named(marker + "L")), budgets.overhead_s + budgets.fresh_round)
    assert started, "no fresh process started"
    harness.send_signal(signal.SIGTERM)
    stdout = harness.stdout.read()
    harness.wait(timeout=budgets.overhead_s)
    result = parse_line(stdout.splitlines()[-1], spec.result_key)
    assert isinstance(result, Result)
    assert result.status is Status.ERROR and "signal 15" in result.verdict
    assert _wait(_gone(marker), 5)


def _gone(marker: str) -> Callable[[], bool]:
    """Whether no process of a ``fails_in_fresh_process`` submission is left, first or later."""
    return lambda: not processes_named(marker) and not processes_named(marker + "L")


def _wait(condition: Callable[[], bool], seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


# --- the arithmetic --------------------------------------------------------------------------


class _NoWork:
    """A problem without flops/bytes: no roofline, so rounds combine on their samples alone."""

    def work(self, case: dict[str, Any]) -> tuple[None, None]:
        return None, None


def _round(times: list[float], process: int) -> benchmark.CaseTiming:
    summary = stats.summarize(times)
    timing = benchmark.CaseTiming(stats.case_result({"size": 1}, summary, ""), summary.median * 1e-9, times)
    timing.process = process
    return timing


def _combine(rounds: list[benchmark.CaseTiming]) -> benchmark.CaseTiming:
    return benchmark.combine_rounds(rounds, _NoWork(), {"size": 1}, GpuInfo(), "cuda", "b", 0)  # type: ignore[arg-type]


def test_the_interval_of_rounds_in_two_processes_covers_both_medians() -> None:
    # Two processes, each steady, one 4% slower for its whole life: the pooled samples alone
    # would give an interval around the middle that neither process reproduces.
    fast = _round([100.0 + 0.01 * i for i in range(41)], process=1)
    slow = _round([104.0 + 0.01 * i for i in range(41)], process=2)
    pooled = stats.summarize(fast.times + slow.times)
    combined = _combine([fast, slow]).result
    assert combined.round_median_ns == [100.2, 104.2]
    assert combined.ci_low_ns is not None and combined.ci_high_ns is not None
    assert combined.ci_low_ns <= 100.2 and combined.ci_high_ns >= 104.2
    assert combined.ci_low_ns >= 100.0 and combined.ci_high_ns <= 104.4  # no wider than the calls
    assert combined.ci_low_ns < pooled.ci_low or combined.ci_high_ns > pooled.ci_high
    # One vote per process: the middle of the two speeds, whichever took more calls. Each
    # process's calls are a speed of their own (benchmark.other_speeds), and it says so.
    assert combined.median_ns == pytest.approx(102.2) and "more than one speed" in combined.message
    assert _combine([fast, _round(slow.times[:11], process=2)]).result.median_ns == pytest.approx((100.2 + 104.05) / 2)


def test_rounds_at_their_processes_speeds_are_all_kept_and_a_slow_spell_is_not() -> None:
    """vectorsum's 2^24 case on an H100 ran near 30.15 or near 30.45 µs per process: keeping the
    majority of three published one speed or the other, a whole 1% apart between jobs; the mean
    of all three lands between them. A round 5% off ran in a slow spell and is left out."""
    speeds = [_round([30_150.0 + (i % 3) for i in range(30)], 1), _round([30_450.0 + (i % 3) for i in range(30)], 2)]
    third = _round([30_151.0 + (i % 3) for i in range(30)], 3)
    combined = _combine([*speeds, third]).result
    assert len(combined.round_median_ns) == 3
    assert combined.median_ns == pytest.approx((30_151.0 + 30_451.0 + 30_152.0) / 3)
    spell = _round([31_700.0 + (i % 3) for i in range(30)], 4)
    assert benchmark.without_slow_spell([*speeds, spell]) == speeds
    assert benchmark.without_slow_spell(speeds) == speeds  # two cannot tell which is off
    assert benchmark.without_slow_spell([*speeds, third, spell]) == [*speeds, third]


def test_agreeing_rounds_keep_the_pooled_interval() -> None:
    first = _round([100.0 + 3 * (i % 7) for i in range(50)], process=1)
    second = _round([100.5 + 3 * (i % 7) for i in range(50)], process=2)
    pooled = stats.summarize(first.times + second.times)
    assert pooled.ci_high - pooled.ci_low > 2 * benchmark.JOB_SPREAD * pooled.median  # wider than the floor
    combined = _combine([first, second]).result
    assert (combined.ci_low_ns, combined.ci_high_ns) == (pooled.ci_low, pooled.ci_high)


def test_no_interval_is_narrower_than_jobs_of_the_same_code_land_apart() -> None:
    # Two steady rounds that agree to 0.01%: a job's own interval would be ±0.02%, yet the next
    # job may land 1% away (the GPU's per-process modes); at least ±0.5% either side ties them.
    first = _round([1000.0 + 0.01 * (i % 5) for i in range(40)], process=1)
    second = _round([1000.1 + 0.01 * (i % 5) for i in range(40)], process=2)
    combined = _combine([first, second]).result
    assert combined.median_ns is not None
    assert combined.ci_low_ns == pytest.approx(combined.median_ns * (1 - benchmark.JOB_SPREAD))
    assert combined.ci_high_ns == pytest.approx(combined.median_ns * (1 + benchmark.JOB_SPREAD))
    assert combined.message == ""  # nothing to say: it is how far any job of it may land


def test_the_dropped_round_is_not_among_the_kept_medians() -> None:
    rounds = [_round([100.0, 101.0, 102.0], 1), _round([110.0, 111.0, 112.0], 2), _round([100.2, 101.2, 100.8], 3)]
    combined = _combine(rounds).result
    assert combined.round_median_ns == [101.0, 100.8]
    assert combined.ci_high_ns is not None and combined.ci_high_ns < 110


def test_rounds_that_shared_a_process_say_so() -> None:
    combined = _combine([_round([100.0, 101.0], 1), _round([100.5, 100.7], 1)]).result
    assert "its 2 rounds ran in 1 process" in combined.message


def test_a_single_round_is_reported_as_it_was_timed() -> None:
    only = _round([100.0, 101.0, 102.0], 1)
    assert _combine([only]) is only and only.result.round_median_ns == []


def test_the_start_ups_still_to_come_are_kept_out_of_a_cases_share() -> None:
    assert time_share(100.0, 4, 0, 3.0) == pytest.approx(0.85 * 100 / 4)
    assert time_share(100.0, 4, 1, 3.0) == pytest.approx(0.85 * 97 / 4)
    assert time_share(2.0, 4, 1, 3.0) == 0.0  # never negative


def test_a_fresh_process_is_started_only_where_it_leaves_time_to_time() -> None:
    assert fresh_fits(60.0, 3.0)
    assert not fresh_fits(5.0, 3.0)  # more than FRESH_MAX_SHARE of what is left
    assert fresh_fits(3.0 / FRESH_MAX_SHARE, 3.0)
    assert not fresh_fits(10.0, 3.0, needed_after_s=8.0)


def test_the_output_of_several_processes_is_marked_and_capped_as_one() -> None:
    first, second = StreamCapture(-1), StreamCapture(-1)
    first.kept += b"hello from one\n"
    second.kept += b"x" * (SHOWN_OUTPUT + 10)
    empty = StreamCapture(-1)
    result = Result(job_id="j", mode=Mode.RANKED, status=Status.PASSED, verdict="")
    attach_process_outputs(
        result, [("process 1 of 2: the first", first, empty), ("process 2 of 2: fresh", second, empty)]
    )
    assert result.stdout.startswith("[kernelcup: stdout of process 1 of 2: the first]\nhello from one\n")
    assert "[kernelcup: stdout of process 2 of 2: fresh]" in result.stdout
    assert "the full stdout is in stdout.txt" in result.stdout and result.files["stdout.txt"].endswith("x\n")
    assert result.stderr == "" and "stderr.txt" not in result.files


# A round of ``slow_inputs`` at its least work: its two cases each make three inputs in the
# submission's process and one in the harness's check (0.6 s each) and make four calls (0.4 s).
# Sleeps: the same on any box.
SLOW_INPUTS_ROUND_S = 8.0


def test_a_ranked_job_whose_cases_outlast_their_share_is_scored_on_the_rounds_that_fit() -> None:
    """Inputs that take 0.6 s to make and 0.4 s calls: each case's least work (a warm-up, no-op
    calls and two timed calls, each on fresh inputs, and a check) outlasts its share of the
    limit. The job is scored on the rounds that fit (one or two) instead of running out of time
    in the next, and says so; where time holds every round (the jobs above), all run.

    The limit is measured on this box as it is now: the first round needs the tests, a fresh
    process and a round's least work; a third would be started only with two rounds done and
    ``NEXT_ROUND_MARGIN`` times the last one and a start-up left. The limit is the geometric mean
    of the two, as far from either as a ratio (~1.7 on a quiet box), so start-ups that much
    slower or faster than measured still end in one or two rounds. A fixed 24 s ran out of time
    inside the first round on a loaded CI box; a fixed 40 s timed three rounds on a quiet one."""
    source = submission("slow_call.py")
    box = measure_startup(LEADERBOARDS / "slow_inputs", source)
    one_round = box.first_s + box.startup_s + SLOW_INPUTS_ROUND_S
    three_rounds = box.first_s + 3 * box.startup_s + (2 + NEXT_ROUND_MARGIN) * SLOW_INPUTS_ROUND_S
    mean = math.sqrt(one_round * three_rounds)
    limit = next(t for t in itertools.count(math.ceil(mean)) if t - reserve_s(t) >= mean)  # less what it keeps back
    spec = leaderboard_spec(
        LEADERBOARDS / "slow_inputs", source, Mode.RANKED, timeout_s=limit, secret_seed=SECRET
    )
    result = run_harness(spec, overhead_s=box.overhead_s).outcome()
    assert result.status is Status.PASSED, result.verdict
    timed = re.search(rf"timed in (\d) rounds? of {benchmark.RANKED_ROUNDS}: the cases needed more", result.verdict)
    assert timed, result.verdict
    rounds_run = int(timed.group(1))
    assert 1 <= rounds_run < benchmark.RANKED_ROUNDS
    assert all(len(case.round_median_ns) <= rounds_run for case in result.benchmarks)
    assert all(case.median_ns for case in result.benchmarks)


def test_another_round_is_refused_only_where_the_last_ones_cases_outlasted_their_shares() -> None:
    from kernelcup.harness.rounds import RoundCost

    def _next_round_fits(shares_s: float, took_s: float, left_s: float, startup_s: float) -> bool:
        return RoundCost(shares_s, took_s).next_fits(left_s, startup_s)

    assert _next_round_fits(100.0, 80.0, 10.0, 2.0)  # within shares: the next round adapts to what is left
    assert _next_round_fits(100.0, 114.0, 1.0, 2.0)
    assert not _next_round_fits(100.0, 130.0, 150.0, 2.0)  # floors bound; 1.2 x 130 s + a start-up do not fit
    assert _next_round_fits(100.0, 130.0, 160.0, 2.0)


def _timed(order_ms: float) -> Timed:
    return Timed(time_ns=order_ms * 1e6, host_ns=0.0, window_ns=order_ms * 1e6)


def test_a_cases_idle_time_is_what_the_submission_spent_beyond_its_typical_call() -> None:
    """What a case took counts towards its least work (and so towards refusing the next ranked
    round) only where the submission could not have spent it for free."""
    steady = [_timed(1.0) for _ in range(40)]
    # An honest case: steady orders, a warm-up that ended within its budget and one last step.
    assert benchmark.idle_time(steady, 1.0 + 0.007, 1.0) == 0.0
    # One timed order of 100 ms among 1 ms ones: the median does not see it, so it is idling.
    assert benchmark.idle_time([*steady, _timed(100.0)], 1.0, 1.0) == pytest.approx(0.097)
    # A warm-up 4 s past its budget with 1 ms orders: all but two last steps of six orders.
    assert benchmark.idle_time(steady, 5.0, 1.0) == pytest.approx(4.0 - 2 * 0.006)
    # Long calls that outlast the warm-up's budget are warm after a few: no idling.
    slow = [_timed(400.0) for _ in range(2)]
    assert benchmark.idle_time(slow, 1.4, 1.0) == 0.0


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, Path]:
    """A quick, steady benchmark job, traced (``KERNELCUP_HARNESS_TRACE``)."""
    trace = tmp_path_factory.mktemp("steady") / "trace.jsonl"
    spec = leaderboard_spec(ADDMUL, submission("steady_call.py"), Mode.BENCHMARK, timeout_s=60)
    result = run_harness(spec, env={benchmark.TRACE_ENV: str(trace)}).outcome()
    assert result.status is Status.PASSED, result.verdict
    return result, trace


def test_the_trace_holds_every_timed_call_of_each_case(steady: tuple[Result, Path]) -> None:
    """``KERNELCUP_HARNESS_TRACE``: one line a case, every timed call in it, each as the
    harness judged it (the case's median is the median of the traced times)."""
    result, trace = steady
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [line["label"].split(" (")[0] for line in lines] == [
        f"benchmark {i} of {len(result.benchmarks)}" for i in range(1, len(result.benchmarks) + 1)
    ]
    at = lines[0]["fields"].index("time_ns")
    for line, case in zip(lines, result.benchmarks, strict=True):
        assert len(line["real"]) == case.runs
        assert stats.median(sorted(call[at] for call in line["real"])) == pytest.approx(case.median_ns, rel=1e-9)
