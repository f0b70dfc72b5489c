"""Timing one benchmark case, driven from the harness process.

Per case: warm up in the child until the per-call time is steady; time a few no-op calls
through the same path (the baseline for the two cross-checks below); then time calls one by
one, each on freshly generated inputs whose seed the child learns only when the call is
ordered, until the median's confidence interval is tight or a limit is reached. After a call
the harness may ask for its output and check it; the child cannot tell beforehand which calls
are checked (ranked mode samples them at random from the harness's own generator).

Cross-checks, from readings the child cannot fake coherently:

- hidden work: a real call's gap (its wall clock less the GPU's span of its own sleep and call)
  exceeds the no-op baseline's, so work outlived the call on another stream or thread. Where
  that excess stands out of the noise, its median is added to every call (counted, not just
  flagged). A timer reached through the call stack can defeat this one (harness/NOTES.md,
  Known gaps).
- the harness's clock around the call: the child announces each call just before its clock
  starts and reports just after it stops; the harness's own clock between those two messages,
  minus the child's wall time, is message overhead that a no-op call pays too. If real calls
  show much more of it, the child reported less time than passed during the call: that
  cannot be honest (its timer was tampered with) and the run fails. Host work inside
  ``custom_kernel`` (``.item()``, allocator calls, compiled-graph guards, Python loops of
  launches) lies inside both clocks and never trips this.
- time outside the call: the rest of each order (inputs generated, L2 flushed, inputs freed)
  as the harness sees it, each call's own order with the next one's (what a call leaves behind
  lands there), against the same for the no-op calls taken among the real ones. Where real
  calls take clearly longer there, the submission's code ran outside its timed call
  (destructors, deferred work, threads, GPU work launched after returning): the difference is
  added to every call's time, never a failure (``outside_time``).
- the inputs as the call got them: right after generating them the child reads a random
  sample of every input tensor; when the harness checks that call it reads the same places of
  its own copy, and inputs changed before the call (output buffers filled while the inputs
  were made, untimed) fail the run.
- the output as the call left it: right after each timed call the child reads a random sample
  of the output (``harness/witness.py``); when the harness checks that call's output, the
  sample is read again, and an output still being written after the call returned (by a
  thread, a finalizer, a kernel launched late) fails the run.
- the physical floor: a median below ``max(flops / peak, bytes / bandwidth)`` fails the run.

The no-op calls also measure what the timing itself costs: the two CUDA events around a call
that launches nothing read about 1.3 µs on an H200, which is also what they add around a
kernel (an empty kernel reads 2.8 µs between the events and 1.4 µs in Nsight Compute). That
median is subtracted from every timed call, so a single kernel's time matches what Nsight
Compute reports for it; it is the same constant for every submission, so it moves no ranking.
It is capped near the same figure measured when the child started, before the submission was
loaded (``timing.noop_event_ns``): GPU work a submission slipped into its job's no-op calls
(from a thread, while they run) cannot make the subtraction take a larger share of its own.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import itertools
import json
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from kernelcup.harness import checking, stats, transfer, witness
from kernelcup.harness.problem import Problem, WorkSource
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.session import Session, Timed
from kernelcup.harness.spec import Case, CaseResult, GpuInfo, Status
from kernelcup.harness.verdict import RunEnded, describe_case, format_seconds

BASELINE_CALLS = 10
BASELINE_MIN_CALLS = 3
BASELINE_SHARE = 0.2  # of a case's time share, at most, before timing starts (past the minimum)
NOOP_SHARE = 0.1
RECHECK_KEEP_BYTES = 256 << 20  # the harness's unused GPU cache kept between rechecks, at most
# Outside time and the clock are judged against the no-op calls among the real ones where at
# least this many were taken. A case timed well enough with fewer goes on until it has them, where
# that fits in its time (``_more_fit``); a slow case ends with fewer: taking more there overran
# its share (a case of 1 s orders ran a 24 s job out of time on a loaded CI box).
PAIRED_MIN_NOOPS = 8
HIDDEN_MIN_NS = 3_000.0  # hidden work below this is indistinguishable from sync jitter
HIDDEN_FRACTION = 0.05
# Tolerated excess of unexplained time per call... (honest runs on an H200 now and then showed
# 100-210 µs of host-side jitter outside the timed window: 100 µs gave false alarms)
CLOCK_SLACK_NS = 250_000.0
CLOCK_SLACK_FRACTION = 0.25  # ...or this fraction of the call's wall time
# On a shared CPU the scheduler preempts a process more right after it burned CPU (the timed
# call), which stretches the untimed part of busy calls only: CPU runs (CI) get more slack.
CLOCK_SLACK_FRACTION_CPU = 1.0
CLOCK_SLACK_NS_CPU = 10_000_000.0  # a loaded 2-core CI box showed up to 1.5 ms of such jitter
# ``KERNELCUP_HARNESS_TRACE``: a file the harness appends every case's calls to, one JSON line a
# case (an operator's diagnosis of a timing; the harness's own process writes it, never the child).
TRACE_ENV = "KERNELCUP_HARNESS_TRACE"
FLOOR_TOLERANCE = 0.9  # vendor peaks are nominal: allow 10% above them before failing
# ``peak_tflops`` is the dense fp16/bf16 peak; fp8 or 2:4 sparsity can double it.
COMPUTE_HEADROOM = 2.0


@dataclass(frozen=True)
class Plan:
    rule: stats.StopRule
    warmup_min_s: float
    warmup_max_s: float
    recheck_probability: float  # besides the first call, which is always checked


BENCHMARK_PLAN = Plan(stats.StopRule(10, 10_000, 1.0, 0.02), 0.05, 0.5, 0.0)
RANKED_PLAN = Plan(stats.StopRule(20, 20_000, 1.5, 0.005), 0.1, 1.0, 0.1)
# Ranked runs time every case in three rounds, one pass over all cases after the other, each in
# a fresh process where time allows, and a case's time is the mean of its rounds' medians: a
# process can be fast or slow for its whole life (vectorsum's 2^24 case ran near 30.15 or near
# 30.45 µs per process on an H100, 2026-11-27), and one vote per process lands near the middle of
# those speeds where keeping the majority (two rounds, a third to break a split, the odd one
# dropped) published whichever speed two processes happened to share, a whole gap apart between
# jobs half the time. Three means put two jobs a whole gap apart in 1 job pair of 32 at equal
# odds, two in 1 of 8. Rounds whose medians differ by more than ``ROUND_AGREEMENT`` get one more.
# The timer's overhead subtracted from each call may exceed its pre-load calibration by this
# much, or double it, whichever is more (clocks ramp; an H100 reads ~1.3 µs either way).
OVERHEAD_SLACK_NS = 1_000.0
RANKED_ROUNDS = 3
# A round this far from the median of its case's rounds ran in a slow spell of the machine (a
# clock dip, a neighbour), not at a speed of its process, and is left out once there are three
# to tell: wider than the processes' speeds apart (~1% on an H100), narrower than a spell.
ROUND_OUTLIER = 0.015
# A call whose host time is at least this share of its GPU time (many launches, a sync per
# call, a tensor built from a Python list) runs at the host's speed, and on the H100 that moved
# between jobs more than a job's own interval shows (bench/gpu/results/2026-11-26-h100-*.md).
# Such a case's interval is at least a spread wide on either side of its median, so the ranking
# ties what the next job could reorder. Not lower: the harness's sleep before each call hides
# launch overhead, so a lone Triton launch (20 µs of host time before a 43 µs kernel) is
# GPU-bound, yet at 0.5 it was marked host-bound.
HOST_BOUND_SHARE = 0.9
# Launch-bound (the sleep hides the launches, the GPU drains their queue): pairs of jobs within
# 0.6-2.0% once the sleep followed the host's pace (2026-11-26, second H100 lease).
HOST_BOUND_SPREAD = 0.03
# Waiting on the GPU inside the call (a sync, ``.item()``, a copy to the host): what the host
# does after the wait is timed at the host's speed, which moved 2-16% between jobs' scores on
# the H100 while each job's rounds agreed. A case moves more: one built with ``torch.tensor`` from
# a Python list every call read 71.1 and 96.6 µs in two jobs on an H100 (ratio 1.36), and GPU
# MODE's grayscale_v2 1024² case 145.1 and 100.2 µs on an H200 (1.45), 2026-11-26; a 4096-element
# case that divides by ``.item()`` 93.8 and 61.0 µs on an H200 (1.54), each job's three rounds in
# fresh processes agreeing, 2026-11-27. Two ranges this wide either side tie up to a ratio of 1.67.
HOST_SYNC_SPREAD = 0.25
ROUND_AGREEMENT = 0.005
# No case's interval is narrower than this either side of its median. Ranked runs of the same
# code on the H100 landed up to ~1% apart on GPU-bound boards (histogram 0.73% in the sixth
# session, conv2d 0.91% the session before) while each job's own intervals were ±0.1-0.3%:
# published as they were, two runs of one submission ranked as a difference. With it, runs
# within 1% of each other tie.
JOB_SPREAD = 0.005
# A round whose median is this uncertain (full width of its 95% interval, relative) also calls
# for a third: it ran out of time in a noisy spell.
ROUND_MAX_CI = 0.02
# Calls at two speeds: where at least ``MODE_SHARE`` of a case's calls sit together at least
# ``MODE_GAP`` from its median (their middle half within ``MODE_TIGHTNESS`` of that distance),
# the share at each speed can move between jobs and take the median with it. On an H100,
# vectoradd's 10000² case ran 18% of its calls near 199 µs and the rest near 229 µs in one job,
# 36% near 229 µs and the rest near 200 µs in the next: medians 228.9 and 200.5 µs, each job's
# interval a fraction of a percent. Such a case's interval covers every speed its calls ran at.
MODE_GAP = 0.02
MODE_SHARE = 0.1
MODE_TIGHTNESS = 0.25
MODE_MIN_CALLS = 40


@dataclass
class CaseTiming:
    result: CaseResult
    median_s: float
    times: list[float] = dataclasses.field(default_factory=list)  # per-call ns, as judged
    note: str = ""
    process: int = 1  # which of the job's submission processes timed it (harness/children.py)
    host_spread: float = 0.0  # host-bound: the least range either side of its median (0: not host-bound)
    idle_s: float = 0.0  # the submission's time beyond its typical call (``idle_time``)


def rounds_agree(rounds: list[CaseTiming]) -> bool:
    """Whether a case's rounds can stand: close medians, each known well enough."""
    medians = [r.median_s for r in rounds]
    if max(medians) - min(medians) > ROUND_AGREEMENT * min(medians):
        return False
    return all(_relative_ci(r.result) <= ROUND_MAX_CI for r in rounds)


def _relative_ci(result: CaseResult) -> float:
    if result.ci_low_ns is None or result.ci_high_ns is None or not result.median_ns:
        return 0.0
    return (result.ci_high_ns - result.ci_low_ns) / result.median_ns


def combine_rounds(
    rounds: list[CaseTiming], problem: Problem | None, case: Case, gpu: GpuInfo, device: str, label: str, l2_bytes: int
) -> CaseTiming:
    """One case's result from its rounds: the mean of their medians, one vote per process,
    without a round caught in a slow spell (``ROUND_OUTLIER``). ``problem``: for the roofline and
    its floor (None: a multi-GPU job, which has neither).

    The interval of the pooled samples alone would only say how well they pin down their median;
    rounds run in separate processes, and a process can be a few percent fast or slow for its
    whole life, so the interval is widened to cover every kept round's median too, and for
    host-bound calls to their spread either side (``host_spread``: a job's rounds do not show how
    far the next job may land)."""
    if len(rounds) == 1:
        widen(rounds[0].result, rounds[0].host_spread, rounds[0].times)
        return rounds[0]
    kept = without_slow_spell(rounds)
    times = [t for r in kept for t in r.times]
    notes = [r.note for r in kept if r.note]
    processes = len({r.process for r in rounds})
    if processes < len(rounds):
        notes.append(
            f"its {len(rounds)} rounds ran in {processes} process{'es' if processes > 1 else ''}: "
            "too little time was left to start a fresh one for each"
        )
    note = "; ".join(dict.fromkeys(notes))
    summary = stats.summarize(times)
    result = stats.case_result(case, summary, note)
    result.round_median_ns = [r.result.median_ns if r.result.median_ns is not None else r.median_s * 1e9 for r in kept]
    centre = result.median_ns = stats.mean(result.round_median_ns)
    result.ci_low_ns, result.ci_high_ns = summary.ci_low, summary.ci_high
    cover(result, result.round_median_ns)
    spread = max(r.host_spread for r in kept)
    widen(result, spread, times)
    overheads = [r.result.timer_overhead_ns for r in kept if r.result.timer_overhead_ns is not None]
    result.timer_overhead_ns = _median(overheads) if overheads else None
    hosts = [r.result.host_median_ns for r in kept if r.result.host_median_ns is not None]
    result.host_median_ns = _median(hosts) if hosts else None
    if problem is not None:
        roofline(result, problem, case, gpu, device, label, l2_bytes)
    return CaseTiming(result, centre * 1e-9, times, result.message, host_spread=spread)


def without_slow_spell(rounds: list[CaseTiming]) -> list[CaseTiming]:
    """``rounds`` less the one farthest from their median where it lies more than
    ``ROUND_OUTLIER`` from it and at least three rounds say so (two cannot tell which is off)."""
    if len(rounds) < 3:
        return list(rounds)
    middle = stats.median(sorted(r.median_s for r in rounds))
    farthest = max(rounds, key=lambda r: abs(r.median_s - middle))
    if abs(farthest.median_s - middle) <= ROUND_OUTLIER * middle:
        return list(rounds)
    return [r for r in rounds if r is not farthest]


def is_host_bound(readings: list[Timed], device: str) -> bool:
    """Whether a case's calls spend at least ``HOST_BOUND_SHARE`` of their GPU time on the host
    (GPU only: on the CPU the host is all there is)."""
    if device != "cuda" or not readings:
        return False
    return _median([r.host_ns for r in readings]) >= HOST_BOUND_SHARE * _median([r.event_ns for r in readings])


def host_spread(readings: list[Timed], device: str) -> float:
    """The least range either side of a host-bound case's median (0: not host-bound)."""
    if not is_host_bound(readings, device):
        return 0.0
    waited = sum(r.ran_out for r in readings)
    return HOST_SYNC_SPREAD if 2 * waited > len(readings) else HOST_BOUND_SPREAD


def widen(result: CaseResult, host_spread: float, times: list[float] | None = None) -> None:
    """A case's interval as published: at least a host-bound case's spread (saying why), at
    least ``JOB_SPREAD`` for every case, and over every speed its calls ran at where they ran at
    more than one (``other_speeds``, saying so)."""
    if host_spread:
        widen_host_bound(result, host_spread)
    at_least(result, JOB_SPREAD)
    if times and result.median_ns is not None:
        speeds = other_speeds(times, result.median_ns)
        if speeds:
            cover(result, [speed for speed, _ in speeds])
            said = "; ".join(
                f"{share:.0%} of its calls ran near {format_seconds(speed * 1e-9)}" for speed, share in speeds
            )
            note = (
                f"calls ran at more than one speed ({said}; the median {format_seconds(result.median_ns * 1e-9)}): "
                "the share at each can move from one job to the next, so its range covers each"
            )
            result.message = f"{result.message}; {note}" if result.message else note


def other_speeds(times: list[float], median: float) -> list[tuple[float, float]]:
    """Where a case's calls also ran at another speed: each such speed (the middle of the calls
    at least ``MODE_GAP`` below, or above, the median) and its share of the calls, where that
    share is at least ``MODE_SHARE`` and those calls sit together (their middle half spans at
    most ``MODE_TIGHTNESS`` of their distance from the median). A long tail is not a speed."""
    if len(times) < MODE_MIN_CALLS or median <= 0:
        return []
    speeds = []
    for side in (
        [t for t in times if t < median * (1 - MODE_GAP)],
        [t for t in times if t > median * (1 + MODE_GAP)],
    ):
        if len(side) < MODE_SHARE * len(times):
            continue
        ordered = sorted(side)
        middle = stats.median(ordered)
        spread = ordered[(3 * len(ordered)) // 4] - ordered[len(ordered) // 4]
        if spread <= MODE_TIGHTNESS * abs(middle - median):
            speeds.append((middle, len(side) / len(times)))
    return speeds


def cover(result: CaseResult, values: list[float]) -> None:
    """Widen ``result``'s interval to take in each of ``values`` (ns)."""
    if values:
        result.ci_low_ns = min(values) if result.ci_low_ns is None else min(result.ci_low_ns, *values)
        result.ci_high_ns = max(values) if result.ci_high_ns is None else max(result.ci_high_ns, *values)


def at_least(result: CaseResult, spread: float) -> None:
    """Widen ``result``'s interval to at least ``spread`` either side of its median."""
    if result.median_ns is None:
        return
    low, high = result.median_ns * (1 - spread), result.median_ns * (1 + spread)
    result.ci_low_ns = min(low, result.ci_low_ns if result.ci_low_ns is not None else low)
    result.ci_high_ns = max(high, result.ci_high_ns if result.ci_high_ns is not None else high)


def widen_host_bound(result: CaseResult, spread: float = HOST_BOUND_SPREAD) -> None:
    """At least ``spread`` either side of the median, and say why."""
    if result.median_ns is None:
        return
    at_least(result, spread)
    why = (
        "waits on the GPU inside the call, and what it does after the wait runs at the host's speed"
        if spread >= HOST_SYNC_SPREAD
        else "at least as much time launching on the host as on the GPU"
    )
    said = (
        f"host-bound ({why}): such calls move from one job to the next by more than a job's own "
        f"rounds show, so its range is at least ±{spread:.0%}"
    )
    if said not in result.message:
        result.message = f"{result.message}; {said}" if result.message else said


def time_case(
    session: Session,
    problem: Problem,
    seeds: SeedPlan,
    case: Case,
    label: str,
    plan: Plan,
    seconds: float,
    gpu: GpuInfo,
    max_payload: int,
    rng: random.Random,
    round_index: int = 0,
) -> CaseTiming:
    """Time one case within ``seconds``; raise :class:`RunEnded` if it fails a check.

    Each round draws its own inputs: a submission that remembers answers learns nothing."""
    begun = time.monotonic()
    tag = f"-round{round_index}" if round_index else ""
    session.activity = f"while warming up {label}"
    warm_s = min(plan.warmup_max_s, max(0.0, seconds * 0.3))
    session.warm_up(seeds.case(case, "warmup" + tag), min(plan.warmup_min_s, warm_s), warm_s)
    warm_took_s = time.monotonic() - begun  # the harness's clock: the warm-up's own "seconds" is the child's word

    session.activity = f"while calibrating {label}"
    baseline: list[Timed] = []
    calibrating = time.monotonic()
    # Every call draws fresh inputs: where generate_input is slow (large linear-algebra cases
    # take a second or more), fewer no-op calls, so the case's share of the limit goes to timing.
    while len(baseline) < BASELINE_CALLS and (
        len(baseline) < BASELINE_MIN_CALLS or time.monotonic() - calibrating < BASELINE_SHARE * seconds
    ):
        baseline.append(session.time_call(seeds.case(case, "baseline" + tag, len(baseline)), noop=True))

    calibrated = len(baseline)
    session.activity = f"in {label}"
    readings: list[Timed] = []
    start = time.monotonic()
    rule = dataclasses.replace(plan.rule, max_seconds=max(0.0, min(plan.rule.max_seconds, seconds - (start - begun))))
    index = 0
    checked = False  # the harness checked the last call's output: the next order runs after its work

    def timed(kwargs: Case, noop: bool = False) -> Timed:
        nonlocal checked
        call = session.time_call(kwargs, noop=noop)
        call.after_check, checked = checked, False
        return call

    while True:
        if rng.random() < NOOP_SHARE:  # no-op calls throughout, so both see the same conditions
            baseline.append(timed(seeds.case(case, "baseline" + tag, len(baseline)), noop=True))
            continue
        kwargs = seeds.case(case, "bench" + tag, index)
        readings.append(timed(kwargs))
        if index == 0 or rng.random() < plan.recheck_probability:
            _recheck(session, problem, kwargs, label, index, max_payload)
            checked = True
        index += 1
        among = len(baseline) - calibrated
        if _timed_enough(readings, index, start, rule) and not _more_fit(among, index, start, rule):
            break

    trace(label, readings, baseline, calibrated)
    times, note, overhead = _times(readings, baseline, session.device, session.noop_event_ns)
    on_gpu = session.device == "cuda"
    slack_ns = CLOCK_SLACK_NS if on_gpu else CLOCK_SLACK_NS_CPU
    fraction = CLOCK_SLACK_FRACTION if on_gpu else CLOCK_SLACK_FRACTION_CPU
    _check_clock(readings, baseline, label, slack_ns, fraction, calibrated)
    outside = outside_time(readings, baseline, slack_ns, fraction, calibrated)
    if outside:
        times = [t + outside for t in times]
        counted = (
            f"the submission's code took ~{outside / 1000:.0f} µs per call outside its timed call (objects "
            "freed, work deferred or left to threads): counted in the time"
        )
        note = f"{note}; {counted}" if note else counted
    said = short_sleep_note(readings + baseline)
    if said:
        note = f"{note}; {said}" if note else said
    summary = stats.summarize(times)
    result = stats.case_result(case, summary, note)
    result.timer_overhead_ns = overhead
    spread = host_spread(readings, session.device)  # widened once its rounds are combined
    result.host_median_ns = _median([r.host_ns for r in readings]) if readings else None
    roofline(result, problem, case, gpu, session.device, label, l2_of(session))
    idle_s = idle_time(readings, baseline[calibrated:] or baseline, warm_took_s, warm_s)
    return CaseTiming(result, summary.median * 1e-9, times, note, host_spread=spread, idle_s=idle_s)


IDLE_CALL_MULTIPLE = 3.0  # a timed call past this many times the median is idling, as far as rounds go


def idle_time(readings: list[Timed], noops: list[Timed], warm_took_s: float, warm_s: float) -> float:
    """Seconds of a case that the submission spent beyond what its typical call explains: timed
    calls past ``IDLE_CALL_MULTIPLE`` times their median, and its warm-up past its budget by
    more than two of the warm-up's last steps (fresh inputs, as a no-op order makes them, and
    five calls). A submission can spend that without moving its score: warm-up calls are not
    scored, and one slow call among many leaves the median where it was. So it is not counted
    as the case's least work when the harness decides whether another ranked round fits
    (``RoundCost``): quick calls cannot idle their way out of the next round's fresh process,
    while a leaderboard whose inputs or checks are slow to make (GPU MODE's eigh with CPU-sized
    cases: 25-36 ms calls, ~0.1 s checks) is scored on the rounds that fit instead of timing out
    in the last one."""
    if not readings:
        return 0.0
    calls = [r.call_ns or r.wall_ns for r in readings]
    typical = _median(calls)
    beyond_calls = sum(max(0.0, c - IDLE_CALL_MULTIPLE * typical) for c in calls)
    inputs = _median([b.window_ns for b in noops]) if noops else 0.0
    beyond_warm_up = max(0.0, (warm_took_s - warm_s) * 1e9 - 2 * (inputs + 5 * typical))
    return (beyond_calls + beyond_warm_up) / 1e9


def _timed_enough(readings: list[Timed], index: int, start: float, rule: stats.StopRule) -> bool:
    """Whether a case's median is known well enough, or its time for timing is up."""
    elapsed = time.monotonic() - start
    # The interval is recomputed every call at first, then every ~3% more calls.
    if (index < 64 or index % (index // 32) == 0) and stats.should_stop([r.event_ns for r in readings], elapsed, rule):
        return True
    return elapsed >= rule.max_seconds and index >= 2


def _more_fit(among: int, real: int, start: float, rule: stats.StopRule) -> bool:
    """Whether a case timed well enough with fewer than ``PAIRED_MIN_NOOPS`` no-op calls among
    its ``real`` calls goes on as it was (a no-op call in ``NOOP_SHARE`` of the orders) until it
    has them: where that is expected to fit in ``rule.max_seconds`` at the pace of its orders so
    far. As it was, not a no-op call before each real one: what a real call leaves behind lands
    in the next order, and with strict turns every no-op order would carry it too, so
    ``outside_time``'s comparison would charge none of it.

    A quick case can stop at its first 20 calls with one or two no-op calls among them, and a
    single no-op call cannot stand for the machine: an honest CUDA-graph submission failed as
    timer tampering on an H200 when the one no-op call among its 20 real calls saw the harness's
    round trip to the child at 81 µs and the real calls a median of ~410 µs (the no-op calls
    before timing: 75-600 µs), and torch.compile's sort was charged 5.1 ms per call outside its
    call on an H100 with three (2026-11-27)."""
    missing = PAIRED_MIN_NOOPS - among
    if missing <= 0:
        return False
    elapsed = time.monotonic() - start
    pace = elapsed / max(1, real + among)
    return elapsed + missing / NOOP_SHARE * pace <= rule.max_seconds


def trace(label: str, readings: list[Timed], baseline: list[Timed], calibrated: int) -> None:
    """Append a case's calls to the file ``KERNELCUP_HARNESS_TRACE`` names, if it names one: its
    no-op calls (the first ``calibrated`` of them taken back to back before timing started) and
    its timed calls, each a list of ``Timed``'s fields, in the order they were taken."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    fields = [f.name for f in dataclasses.fields(Timed)]
    line = {
        "label": label,
        "unix": time.time(),
        "fields": fields,
        "calibrated": calibrated,
        "noop": [[getattr(b, f) for f in fields] for b in baseline],
        "real": [[getattr(r, f) for f in fields] for r in readings],
    }
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def short_sleep_note(calls: list[Timed]) -> str:
    """What a case says where calls proved the harness's sleep ran short (``timing.sleep_ran_short``):
    those calls were timed at the host's pace, the rest after the sleep was measured again."""
    shorts = sum(call.short_sleep for call in calls)
    if not shorts:
        return ""
    calls_said = f"{shorts} call{'s' if shorts > 1 else ''}"
    return f"the harness's launch-hiding sleep ran short of its length in {calls_said} and was measured again"


def l2_of(session: Session) -> int:
    l2_bytes = session.info.get("l2_bytes", 0)
    return int(l2_bytes) if isinstance(l2_bytes, int) else 0


def _recheck(session: Session, problem: Problem, kwargs: Case, label: str, index: int, max_payload: int) -> None:
    try:
        _check_one(session, problem, kwargs, label, index, max_payload)  # its inputs and output die with it
    finally:
        # The harness's share of the GPU back before the next timed call: the inputs it made and
        # the reference's work would otherwise stay in its cache. GPU MODE's trimul, ranked on an
        # H100, ran the submission out of memory in its largest case (79 GiB card, 1.4 GiB free,
        # the submission's process holding 15.6 GiB) after the case before had been checked.
        # A small cache stays: rechecks come every tenth timed call or so.
        checking.release_memory(session.device, keep_bytes=RECHECK_KEEP_BYTES)


def _check_one(session: Session, problem: Problem, kwargs: Case, label: str, index: int, max_payload: int) -> None:
    data = problem.generate(kwargs, session.device)  # first: its size sets how much output is taken
    shipped = session.ship(transfer.payload_limit(max_payload, data))
    where = f"{label} (timed call {index + 1}, {describe_case(kwargs)})"
    if shipped.error:
        raise RunEnded(Status.FAILED, f"{where} returned a bad output: {shipped.error}")
    _check_inputs(shipped.inputs, problem, kwargs, data, session.device, where)
    try:
        ok, message = checking.check_output(problem, data, shipped.output)
    except checking.LeaderboardFault as exc:
        raise RunEnded(Status.ERROR, f"the leaderboard's check failed in {where}: {exc}") from None
    if not ok:
        raise RunEnded(Status.FAILED, f"{where} gave a wrong answer: {message}")


def _check_inputs(
    seen: list[witness.Witness], problem: Problem, kwargs: Case, data: object, device: str, where: str
) -> None:
    """Fail a call whose inputs, as the child sampled them right after generating them, differ
    from the harness's own: the submission changed them before its timed call (say, wrapped
    the generator to fill the output buffers while the inputs are made, untimed). A generator
    that does not repeat itself is the leaderboard's fault, never the submission's."""
    differs = witness.inputs_differ(seen, data)
    if not differs:
        return
    again = problem.generate(kwargs, device)
    if witness.inputs_differ([w for w in witness.reread(seen, data) if w is not None], again):
        return  # the leaderboard's generator gave two different results: nothing to hold against the submission
    raise RunEnded(
        Status.FAILED,
        f"{where}: the inputs custom_kernel was timed on differ from the generated ones in {differs} "
        "(changed after they were generated and before the call, e.g. output buffers filled while the inputs "
        "were made, untimed)",
    )


def _median(values: list[float]) -> float:
    return float(stats.median(sorted(values)))


def _median_error(values: list[float]) -> float:
    """Standard error of a median, from the median absolute deviation (robust to outliers)."""
    middle = _median(values)
    mad = _median([abs(v - middle) for v in values])
    return 1.2533 * 1.4826 * mad / math.sqrt(max(1, len(values)))


def _times(
    readings: list[Timed], baseline: list[Timed], device: str, calibrated_ns: float | None = None
) -> tuple[list[float], str, float | None]:
    """Per-call times, the note that says how they were taken, and the timer's overhead.

    GPU event times, or wall-clock times when work was hidden; on a GPU, less the events' own
    cost (the no-op calls' median event time). The subtraction never takes more than half of
    a call, so a call that launches (next to) nothing keeps a positive time, and never much
    more than the same cost measured before the submission was loaded (``calibrated_ns``): no
    -op calls made slower by the submission do not shorten its own."""
    events = [r.event_ns for r in readings]
    if device != "cuda":
        return events, "", None
    overhead = _median([b.event_ns for b in baseline])
    if calibrated_ns is not None:
        overhead = min(overhead, max(2 * calibrated_ns, calibrated_ns + OVERHEAD_SLACK_NS))
    # Work the events missed (a thread, a stream outside the pool) shows as more host time
    # around the call than a no-op call has: added to each call where it stands out of the
    # noise. Per call, the wall clock's own jitter would be added too (a launch-bound call of
    # 13 µs read 41 µs on the H100, and 13 µs in the next job, when each call took the larger
    # of its two clocks), so the excess added is the median one.
    # Each gap is held to the GPU's span of its own sleep and call, not to the event time: the
    # sleep grows within a case where calls outlast it, and no-op calls taken before it grew would
    # make every later call look like it left work behind (an honest 567 µs conv2d case read
    # 970 µs on an H100, "work continued for ~403 µs", after one call's host was held up).
    gaps = [r.gap_ns for r in readings]
    excess = _beyond_noise([b.gap_ns for b in baseline], gaps, HIDDEN_MIN_NS, HIDDEN_FRACTION, _median(events))
    note = ""
    raw = events
    if excess:
        raw = [t + excess for t in events]
        note = (
            f"work continued for ~{excess / 1000:.1f} µs after custom_kernel returned (another "
            "stream or thread): added to each call's time"
        )
    return [max(t - overhead, t / 2) for t in raw], note, overhead


Estimate = tuple[Callable[[list[float]], float], Callable[[list[float]], float]]  # centre, its error


def _beyond_noise(
    idle: list[float],
    busy: list[float],
    slack_ns: float,
    fraction: float,
    wall: float,
    estimate: Estimate | None = None,
) -> float:
    """How much larger ``busy`` is than ``idle``, or 0 within slack and four standard errors of
    the difference. By medians, or by ``estimate`` (``MEANS`` for ``outside_time``)."""
    centre, error = estimate or (_median, _median_error)
    excess = centre(busy) - centre(idle)
    noise = 4.0 * math.hypot(error(idle), error(busy))
    return excess if excess > max(slack_ns, fraction * wall, noise) else 0.0


def _beyond_nearest(
    baseline: list[Timed],
    busy: list[Timed],
    measure: Callable[[Timed], float],
    slack_ns: float,
    fraction: float,
    wall: float,
    before: list[float] | None = None,
) -> float:
    """How much more ``measure`` reads on the ``busy`` (real) calls than on the no-op calls of
    ``baseline``, each real call against the no-op call nearest it in time: the median of those
    differences, or 0 within slack and noise.

    For a slow case, with fewer than ``PAIRED_MIN_NOOPS`` no-op calls among its real ones: the
    machine can move between the calibration and the timing, or in the middle of a case, and a
    few no-op calls cannot stand for every stretch. On an H100 with a job on the host's other
    GPU, an honest Triton grayscale failed as timer tampering when the harness's round trip to
    the child rose from ~270 µs in the calibration to ~530 µs for the real calls and the one
    no-op call among them; in another case every order's untimed time stepped from ~0.8 to
    ~1.1 ms two thirds of the way through, after two of its three no-op calls, and 312 µs per
    call was charged (2026-11-27). Replayed over that session's 613 traced case-rounds (H100
    and H200), this left no tampering verdict.

    ``before``: the no-op calls taken back to back before timing, where the submission's
    leftovers do not land. Their spread over the root of how many no-op calls stood in is noise
    too: a process that stalls in half its orders whatever the call (``torch.compile``'s sort)
    put 2-4.5 ms per call between a few no-op calls and the real ones around them on an H100
    (2026-11-27, outside time); and the harness's own round trip to the child read 75-600 µs
    over the no-op calls of an honest CUDA-graph submission's 334 µs case on an H200, where the
    one no-op call among its 20 real calls read 81 µs and the real calls a median of ~410 µs: it
    failed as timer tampering, 332 µs per call (2026-11-27, the clock check)."""
    if not busy or not baseline:
        return 0.0
    nearest = _nearest(baseline, busy)
    differences = [measure(call) - measure(near) for call, near in zip(busy, nearest, strict=True)]
    noise = 4.0 * _median_error(differences)
    if before:
        noise = max(noise, 4.0 * stats.mean_error(before) * math.sqrt(len(before) / len({id(n) for n in nearest})))
    excess = _median(differences)
    return excess if excess > max(slack_ns, fraction * wall, noise) else 0.0


def _nearest(baseline: list[Timed], busy: list[Timed]) -> list[Timed]:
    """The call of ``baseline`` nearest each call of ``busy`` in time (``at_ns``)."""
    ordered = sorted(baseline, key=lambda call: call.at_ns)
    times = [call.at_ns for call in ordered]
    nearest = []
    for call in busy:
        at = bisect.bisect_left(times, call.at_ns)
        nearest.append(min(ordered[max(0, at - 1) : at + 1], key=lambda other: abs(other.at_ns - call.at_ns)))
    return nearest


def _beyond_few(
    baseline: list[Timed],
    busy: list[Timed],
    measure: Callable[[Timed], float],
    slack_ns: float,
    fraction: float,
    wall: float,
    settled: list[Timed],
    among: list[Timed],
) -> float:
    """How much more ``measure`` reads on the ``busy`` (real) calls of a slow case, one with
    fewer than ``PAIRED_MIN_NOOPS`` no-op calls ``among`` them: the lesser of the excess over the
    no-op call of ``baseline`` nearest each (``_beyond_nearest``, with the ``settled`` no-op
    calls before timing as its noise) and the excess over the ``settled`` and ``among`` no-op
    calls as a whole (``_beyond_noise``, medians). Either alone can be fooled: the round trip can
    move between the calibration and the timing (the nearest one is needed), and a no-op call
    among the real ones can be an outlier that every real call is nearest (the whole is needed).
    GPU MODE's torch.compile sort failed as timer tampering on an H200, 614 µs per call, where
    the harness heard the child late in both no-op calls among its 21 real ones (-953 and -207 µs
    unexplained; every other call 270-590 µs; 2026-11-27)."""
    before = [measure(b) for b in settled]
    return min(
        _beyond_nearest(baseline, busy, measure, slack_ns, fraction, wall, before),
        _beyond_noise(before + [measure(b) for b in among], [measure(c) for c in busy], slack_ns, fraction, wall),
    )


MEANS: Estimate = (stats.mean, stats.mean_error)


def _settled(baseline: list[Timed], calibrated: int) -> list[Timed]:
    """The no-op calls taken back to back before timing, less the first: its order ran right
    after the warm-up and carries what the warm-up's last call left behind (a 60 ms finalizer
    would pass for the no-op calls' own noise)."""
    return baseline[1:calibrated]


def _check_clock(
    readings: list[Timed], baseline: list[Timed], label: str, slack_ns: float, fraction: float, calibrated: int = 0
) -> None:
    """Fail when the child reported less time than the harness's clock saw pass around the call.

    The harness's clock runs from the child's "calling" message (sent just before the child's
    clock starts) to its reading (sent just after it stops): what the child does for a call of
    ``custom_kernel``, host work included, lies inside both clocks. Only a child whose reading
    is short of what passed (its timer slowed or its reading rewritten) shows more unexplained
    time on real calls than on the no-op calls taken among them (with too few of those, than on
    the no-op call nearest each and on every settled one as a whole: ``_beyond_few``).
    """
    wall = _median([r.wall_ns for r in readings])
    among = baseline[calibrated:]

    def unexplained(call: Timed) -> float:
        return call.call_ns - call.wall_ns

    if len(among) >= PAIRED_MIN_NOOPS:  # taken among the real calls: the same conditions
        idle, busy = [unexplained(b) for b in among], [unexplained(r) for r in readings]
        short = _beyond_noise(idle, busy, slack_ns, fraction, wall)
    else:
        settled = _settled(baseline, calibrated)
        short = _beyond_few(baseline, readings, unexplained, slack_ns, fraction, wall, settled, among)
    if short:
        raise RunEnded(
            Status.FAILED,
            f"{label}: the submission's process reported {short / 1000:.0f} µs per call less than the harness's "
            "clock saw pass during the call (timer tampering)",
        )
    impossible = sum(1 for r in readings if r.event_ns > r.wall_ns * 1.01 + 10_000)
    if impossible > len(readings) // 10:
        raise RunEnded(Status.FAILED, f"{label}: GPU times longer than the host saw (timer tampering?)")


def outside_time(
    readings: list[Timed], baseline: list[Timed], slack_ns: float, fraction: float, calibrated: int = 0
) -> float:
    """Time per real call the child spent outside the timed call beyond what a no-op call costs.

    Generating and freeing inputs cost the same around a no-op call; anything more is the
    submission's code running after its call returned (destructors, deferred host or GPU work,
    background threads). Honest or not, a caller of ``custom_kernel`` waits for it too, so it
    is added to the time instead of failing the run. Within slack and noise it is 0.

    What a call does before its clock starts lands in its own order; what it leaves behind
    lands in the next one (its output is freed when the next order comes). So where at least
    ``PAIRED_MIN_NOOPS`` no-op calls were taken among the real ones (after the first
    ``calibrated``, which came back to back before timing started), each call is judged on its
    own order's untimed time plus the next order's, against the same sum for those no-op calls:
    under the random interleaving the sums differ by exactly what a real call adds, and both see
    the same conditions. The no-op calls taken before timing did not: their untimed time sat
    100-400 µs off the real calls' in many cases on an H200 while the interleaved ones agreed
    within tens of µs, and an honest tiny add was charged ~309 µs per call against them on an
    H100 (2026-11-27). The sums also even out a process that stalls every few orders
    (``torch.compile``'s sort: orders alternated between ~1 and ~4-7 ms, no-op or real). Two
    orders' jitter: twice the slack. With fewer no-op calls among them (a slow case), each real
    call's two orders against the nearest one's in time and against every settled one's as a
    whole, the lesser (``_beyond_few``); with none,
    each real call's own order against every no-op call's.

    With enough no-op calls among them, means, not medians, and four standard errors of the
    difference as the noise: outside time is what a caller waits for on average, and a process
    that stalls at random in about half of its orders, no-op or real (``torch.compile``'s sort:
    ~0.8 ms or ~4-7 ms), puts a median on whichever side of the stall the no-op calls fell. An
    honest sort was charged 1,663 µs per call on an H100 when 5 of its 23 no-op orders stalled
    and 141 of its 264 real ones did (2026-11-27).
    """
    among = baseline[calibrated:]
    wall = _median([r.wall_ns for r in readings])
    if not among:
        return _beyond_noise(
            [b.window_ns - b.call_ns for b in baseline if not b.after_check],
            [r.window_ns - r.call_ns for r in readings if not r.after_check],
            slack_ns,
            fraction,
            wall,
        )
    ordered = sorted(readings + baseline, key=lambda call: call.at_ns)
    with_next = {  # an order that came right after the harness checked an output ran after its work
        id(call): (call.window_ns - call.call_ns) + (after.window_ns - after.call_ns)
        for call, after in itertools.pairwise(ordered)
        if not call.after_check and not after.after_check
    }
    real = [r for r in readings if id(r) in with_next]
    idle = [b for b in among if id(b) in with_next]
    if not real or not idle:
        return 0.0
    if len(among) < PAIRED_MIN_NOOPS:
        settled = [b for b in _settled(baseline, calibrated) if id(b) in with_next]

        def two_orders(call: Timed) -> float:
            return with_next[id(call)]

        return _beyond_few(idle, real, two_orders, 2 * slack_ns, fraction, 2 * wall, settled, idle)
    paired = [with_next[id(r)] for r in real]
    return _beyond_noise([with_next[id(b)] for b in idle], paired, 2 * slack_ns, fraction, 2 * wall, MEANS)


def roofline(
    result: CaseResult, problem: WorkSource, case: Case, gpu: GpuInfo, device: str, label: str, l2_bytes: int = 0
) -> None:
    """TFLOP/s, GB/s and % of peak; fail a median below the physical floor.

    The floor is one no honest kernel can beat: inputs come from DRAM (L2 was flushed), but up
    to ``l2_bytes`` of writes may still sit in L2 when the end event fires, and compute may run
    at ``COMPUTE_HEADROOM`` times the dense peak.
    """
    flops, nbytes = problem.work(case)
    median_s = (result.median_ns or 0.0) * 1e-9
    if median_s <= 0:
        return
    ratios = []
    floor_s = 0.0
    if flops is not None:
        result.tflops = flops / median_s / 1e12
        if gpu.peak_tflops:
            ratios.append(result.tflops / gpu.peak_tflops)
            floor_s = max(floor_s, flops / (COMPUTE_HEADROOM * gpu.peak_tflops * 1e12))
    if nbytes is not None:
        result.gbps = nbytes / median_s / 1e9
        if gpu.peak_bandwidth_gbps:
            ratios.append(result.gbps / gpu.peak_bandwidth_gbps)
            floor_s = max(floor_s, max(0.0, nbytes - l2_bytes) / (gpu.peak_bandwidth_gbps * 1e9))
    if ratios and device == "cuda":
        result.percent_of_peak = 100.0 * max(ratios)
        if median_s < FLOOR_TOLERANCE * floor_s:
            raise RunEnded(
                Status.FAILED,
                f"{label} ran in {median_s * 1e6:.2f} µs, below the physical floor of "
                f"{floor_s * 1e6:.2f} µs for {gpu.name} (from flops/bytes and its peaks): "
                "not a real measurement",
            )
