"""Timing one benchmark case, driven from the harness process.

Per case: warm up in the child until the per-call time is steady; then time calls one by one,
each on freshly generated inputs whose seed the child learns only when the call is ordered,
until the median's confidence interval is tight or a limit is reached. After a call the
harness may ask for its output and check it; the child cannot tell beforehand which calls are
checked (ranked mode samples them at random from the harness's own generator).

A call's time is the GPU's own record of what it launched, on every stream and from every
thread (``harness/timing.py``, ``harness/record.py``); work another thread of the submission's
process launched outside its calls is added to the call's time and said in the case's message.
Besides the record:

- the inputs as the call got them: right after generating them the child reads a random
  sample of every input tensor; when the harness checks that call it reads the same places of
  its own copy, and inputs changed before the call (output buffers filled while the inputs
  were made, untimed) fail the run.
- the output as the call left it: right after each timed call the child reads a random sample
  of the output (``harness/witness.py``); when the harness checks that call's output, the
  sample is read again, and an output still being written after the call returned (by a
  thread, a finalizer, a kernel launched late) fails the run.
- the physical floor: a median below ``max(flops / peak, bytes / bandwidth)`` fails the run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import time
from dataclasses import dataclass

from kernelcup.harness import checking, stats, transfer, witness
from kernelcup.harness.problem import Problem, WorkSource
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.session import Session, Timed
from kernelcup.harness.spec import Case, CaseResult, GpuInfo, Status
from kernelcup.harness.verdict import RunEnded, describe_case, format_seconds

RECHECK_KEEP_BYTES = 256 << 20  # the harness's unused GPU cache kept between rechecks, at most
# ``KERNELCUP_HARNESS_TRACE``: a file the harness appends every case's calls to, one JSON line a
# case (an operator's diagnosis of a timing; the harness's own process writes it, never the child).
TRACE_ENV = "KERNELCUP_HARNESS_TRACE"
# A CPU call the harness saw take over twice the child's reading plus this much was under-reported
# (a loaded 2-core CI box showed up to 1.5 ms of scheduling jitter between the two clocks).
HOST_CLOCK_FACTOR = 2.0
HOST_CLOCK_SLACK_NS = 10_000_000.0
FLOOR_TOLERANCE = 0.9  # vendor peaks are nominal: allow 10% above them before failing
# ``peak_tflops`` is the dense fp16/bf16 peak; fp8 or 2:4 sparsity can double it.
COMPUTE_HEADROOM = 2.0


@dataclass(frozen=True)
class Plan:
    rule: stats.StopRule
    warmup_min_s: float
    warmup_max_s: float
    recheck_probability: float  # besides the first call, which is always checked


# The GPU's record stamps activities in steps of 32 ns (H100, H200): a median known to within two
# steps is known as well as the record can say, however small a share of a short call that is
# (a 3.1 µs case ran its whole 1.5 s, 547 calls, for a 0.5% interval it could not reach).
RECORD_STEP_NS = 32.0
BENCHMARK_PLAN = Plan(stats.StopRule(10, 10_000, 1.0, 0.02, 2 * RECORD_STEP_NS), 0.05, 0.5, 0.0)
# Ranked: 0.6 s per case and round (1.5 s until 2026-11-28): three rounds in fresh processes
# average what a process's speed moves, and a case that ran its whole time did so because its
# calls spread wider than the interval asked (host-paced work), which more calls do not narrow
# between jobs. With the warm-up's cap of 0.5 s, a ranked job of five cases times for at most
# 16.5 s in three rounds.
RANKED_PLAN = Plan(stats.StopRule(20, 20_000, 0.6, 0.005, 2 * RECORD_STEP_NS), 0.1, 0.5, 0.1)
# Ranked runs time every case in three rounds, one pass over all cases after the other, each in
# a fresh process where time allows, and a case's time is the mean of its rounds' medians: a
# process can be fast or slow for its whole life (vectorsum's 2^24 case ran near 30.15 or near
# 30.45 µs per process on an H100, 2026-11-27), and one vote per process lands near the middle of
# those speeds where keeping the majority (two rounds, a third to break a split, the odd one
# dropped) published whichever speed two processes happened to share, a whole gap apart between
# jobs half the time. Three means put two jobs a whole gap apart in 1 job pair of 32 at equal
# odds, two in 1 of 8. Rounds whose medians differ by more than ``ROUND_AGREEMENT`` get one more.
RANKED_ROUNDS = stats.RANKED_ROUNDS  # in stats.py, which the harness imports before torch
# A round this far from the median of its case's rounds ran in a slow spell of the machine (a
# clock dip, a neighbour), not at a speed of its process, and is left out once there are three
# to tell: wider than the processes' speeds apart (~1% on an H100), narrower than a spell.
ROUND_OUTLIER = 0.015
# A call whose GPU waited on the host for at least this share of its span (many small launches,
# a sync per call, a tensor built from a Python list) runs at the host's speed, which moves
# between jobs more than a job's own interval shows (bench/gpu/results/2026-11-26-h100-*.md).
# Such a case's interval is at least a spread wide on either side of its median, so the ranking
# ties what the next job could reorder.
HOST_BOUND_IDLE = 0.5
# Launch-bound: pairs of jobs of launch-bound boards within 0.6-2.0% on an H100.
HOST_BOUND_SPREAD = 0.03
# Waiting on the GPU inside the call (a sync, ``.item()``, a copy to the host): what the host
# does after the wait is timed at the host's speed, which moved cases up to 1.54x between jobs
# on an H100 and an H200 (BENCHMARKS.md, repeatability). Two ranges this wide either side tie up
# to a ratio of 1.67.
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
    rank_median_ns: list[float] = dataclasses.field(default_factory=list)  # multi-GPU: each rank's, this round


def rounds_agree(rounds: list[CaseTiming]) -> bool:
    """Whether a case's rounds can stand: close medians, each known well enough."""
    medians = [r.median_s for r in rounds]
    if max(medians) - min(medians) > max(ROUND_AGREEMENT * min(medians), 2 * RECORD_STEP_NS * 1e-9):
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
        rounds[0].result.rank_median_ns = list(rounds[0].rank_median_ns)
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
    # Each rank's median over the same rounds as the case's, so the slowest rank's is the case's.
    ranks = zip(*(r.rank_median_ns for r in kept), strict=True)
    result.rank_median_ns = [stats.mean(list(medians)) for medians in ranks]
    result.ci_low_ns, result.ci_high_ns = summary.ci_low, summary.ci_high
    cover(result, result.round_median_ns)
    spread = max(r.host_spread for r in kept)
    widen(result, spread, times)
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
    """Whether a case's GPU waited on the host for at least ``HOST_BOUND_IDLE`` of its calls'
    spans, as the record shows (GPU only: on the CPU the host is all there is)."""
    if device != "cuda" or not readings:
        return False
    return _median([r.idle_share for r in readings]) >= HOST_BOUND_IDLE


def host_spread(readings: list[Timed], device: str) -> float:
    """The least range either side of a host-bound case's median (0: not host-bound)."""
    if not is_host_bound(readings, device):
        return 0.0
    waited = sum(r.waited for r in readings)
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

    session.activity = f"in {label}"
    readings: list[Timed] = []
    start = time.monotonic()
    rule = dataclasses.replace(plan.rule, max_seconds=max(0.0, min(plan.rule.max_seconds, seconds - (start - begun))))
    index = 0
    while True:
        kwargs = seeds.case(case, "bench" + tag, index)
        readings.append(session.time_call(kwargs))
        if index == 0 or rng.random() < plan.recheck_probability:
            _recheck(session, problem, kwargs, label, index, max_payload)
        index += 1
        if _timed_enough(readings, index, start, rule, session.device):
            break

    trace(label, readings)
    if session.device != "cuda":
        _check_host_clock(readings, label)
    times = [r.time_ns for r in readings]
    note = outside_note(readings)
    summary = stats.summarize(times)
    result = stats.case_result(case, summary, note)
    spread = host_spread(readings, session.device)  # widened once its rounds are combined
    result.host_median_ns = _median([r.host_ns for r in readings]) if readings else None
    roofline(result, problem, case, gpu, session.device, label, l2_of(session))
    idle_s = idle_time(readings, warm_took_s, warm_s)
    return CaseTiming(result, summary.median * 1e-9, times, note, host_spread=spread, idle_s=idle_s)


def _check_host_clock(readings: list[Timed], label: str) -> None:
    """On the CPU the child's host clock is the time, and a submission that reaches into the
    timer object can slow it: fail a case whose every call took far longer by the harness's own
    clock (from the child's "calling" message to its reading) than the child reported. A loaded
    box delays some calls' messages by many milliseconds (13 ms in the median on a CI box whose
    calls took 0.23 ms), never all of them, while an under-report holds for every call: so the
    fastest call the harness saw is held to the child's median, and the slack is scheduling
    jitter. On a GPU the record's ids, not a clock, mark the call (``harness/record.py``)."""
    observed = [r.call_ns for r in readings if r.call_ns > 0]
    if not observed:
        return
    reported, seen = _median([r.time_ns for r in readings]), min(observed)
    if seen > HOST_CLOCK_FACTOR * reported + HOST_CLOCK_SLACK_NS:
        raise RunEnded(
            Status.FAILED,
            f"timer tampering in {label}: the submission's process reported {format_seconds(reported * 1e-9)} "
            f"per call while the harness's clock saw no call take less than {format_seconds(seen * 1e-9)}",
        )


def outside_note(readings: list[Timed]) -> str:
    """What a case says where another thread launched GPU work outside the timed calls."""
    outside = [r.outside_ns for r in readings]
    charged = sum(1 for ns in outside if ns > 0)
    if not charged:
        return ""
    return (
        f"another thread of the submission launched GPU work outside its timed call in {charged} of "
        f"{len(readings)} calls (median {_median(outside) / 1000:.1f} µs per call): counted in the time"
    )


IDLE_CALL_MULTIPLE = 3.0  # a timed call past this many times the median is idling, as far as rounds go


def idle_time(readings: list[Timed], warm_took_s: float, warm_s: float) -> float:
    """Seconds of a case that the submission spent beyond what its typical call explains: timed
    calls past ``IDLE_CALL_MULTIPLE`` times their median, and its warm-up past its budget by
    more than two of the warm-up's last steps (fresh inputs and five calls, as the harness's
    clock saw an order). A submission can spend that without moving its score: warm-up calls
    are not scored, and one slow call among many leaves the median where it was. So it is not
    counted as the case's least work when the harness decides whether another ranked round fits
    (``RoundCost``): quick calls cannot idle their way out of the next round's fresh process,
    while a leaderboard whose inputs or checks are slow to make is scored on the rounds that fit
    instead of timing out in the last one."""
    if not readings:
        return 0.0
    orders = [r.window_ns for r in readings]
    typical = _median(orders)
    beyond_calls = sum(max(0.0, c - IDLE_CALL_MULTIPLE * typical) for c in orders)
    beyond_warm_up = max(0.0, (warm_took_s - warm_s) * 1e9 - 2 * 6 * typical)
    return (beyond_calls + beyond_warm_up) / 1e9


def _timed_enough(
    readings: list[Timed], index: int, start: float, rule: stats.StopRule, device: str = "cpu"
) -> bool:
    """Whether a case's median is known well enough, or its time for timing is up.

    A host-bound case is published with at least its host spread either side (``widen``): an
    interval within that is known as well as it will be shown, so it stops there."""
    elapsed = time.monotonic() - start
    # The interval is recomputed every call at first, then every ~3% more calls.
    if index < 64 or index % (index // 32) == 0:
        spread = host_spread(readings, device) if index >= rule.min_runs else 0.0
        if spread:
            rule = dataclasses.replace(rule, rel_ci_width=max(rule.rel_ci_width, spread))
        if stats.should_stop([r.time_ns for r in readings], elapsed, rule):
            return True
    return elapsed >= rule.max_seconds and index >= 2


def trace(label: str, readings: list[Timed]) -> None:
    """Append a case's calls to the file ``KERNELCUP_HARNESS_TRACE`` names, if it names one:
    each a list of ``Timed``'s fields, in the order they were taken."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    fields = [f.name for f in dataclasses.fields(Timed)]
    line = {
        "label": label,
        "unix": time.time(),
        "fields": fields,
        "real": [[getattr(r, f) for f in fields] for r in readings],
    }
    with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


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


def roofline(
    result: CaseResult, problem: WorkSource, case: Case, gpu: GpuInfo, device: str, label: str, l2_bytes: int = 0
) -> None:
    """TFLOP/s, GB/s and % of peak; fail a median below the physical floor.

    The floor is one no honest kernel can beat: inputs come from DRAM (L2 was flushed), but up
    to ``l2_bytes`` of writes may still sit in L2 when the call's last activity ends, and compute may run
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
