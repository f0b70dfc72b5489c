"""A multi-GPU job: tests and benchmarks with one process per rank (``harness/rank_group.py``).

GPU MODE's distributed format: every case names its ``world_size``; ``generate_input`` takes
``rank`` (and ``world_size``, from the case) and makes that rank's inputs on the rank's card;
``custom_kernel`` runs on every rank with ``torch.distributed`` ready; the reference and the
check are collective too. kernelcup adds ``device`` where ``generate_input`` asks for it
(``cuda:<rank>`` or ``cpu``), so a leaderboard can also run with gloo on the CPU.

What carries over from single-GPU jobs: the secret seed stays in this process (each rank learns
one derived seed per call), inputs are generated twice and fingerprinted, outputs come back as
bytes and are checked by the harness's own reference ranks, never in the submission's
processes. Timing: each call starts on every rank after one barrier and a device synchronize;
the call's time is the slowest rank's, and the case's per-rank medians are kept beside it.
Ranked mode times its cases in two rounds, each in a fresh group of rank processes where the
time left allows (as single-GPU rounds each run in a fresh process, ``harness/run.py``): a
case's time is the mean of its rounds' medians, and its interval covers both and at least
``benchmark.JOB_SPREAD`` either side. Each rank's call is timed from its own GPU record, as a
single-GPU call is (``harness/timing.py``). What does not carry over (yet): the CPU clock check
and the roofline floor of ``harness/benchmark.py``, its third round, and one more where rounds
disagree: a group of ranks takes seconds to start where a process takes one or two.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from kernelcup.harness import benchmark, protocol, scoring, stats
from kernelcup.harness import fingerprint as fp
from kernelcup.harness.benchmark import BENCHMARK_PLAN, RANKED_PLAN, CaseTiming
from kernelcup.harness.children import may_start_again, started_again_note
from kernelcup.harness.rank_group import RankGroup, free_port
from kernelcup.harness.reporting import Emit
from kernelcup.harness.rounds import Rounds
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.spec import CaseResult, JobSpec, Mode, Progress, Result, Status
from kernelcup.harness.verdict import RunEnded, describe_case, format_seconds
from kernelcup.harness.workspace import Workspace, build_cache_env

WARMUP_CALLS = {Mode.BENCHMARK: 3, Mode.RANKED: 5}
# A ranked round starts its own group of ranks where the time left holds this many starts like
# the job's first (and the round's cases their shares besides).
FRESH_STARTS_NEEDED = 3.0
STARTING = "while starting"  # a group's activity until the submission is imported into its ranks


def resolve_device(spec: JobSpec) -> str:
    import torch

    if spec.device == "cpu" or (spec.device == "auto" and not torch.cuda.is_available()):
        return "cpu"
    if not torch.cuda.is_available():
        raise RunEnded(Status.ERROR, "a GPU was requested but CUDA is not available on this machine")
    found = torch.cuda.device_count()
    if found < spec.task.world_size:
        raise RunEnded(
            Status.ERROR,
            f"this leaderboard runs {spec.task.world_size} ranks, one per GPU, and this machine gave the job "
            f"{found} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})",
        )
    return "cuda"


def rank_cards(world_size: int, device: str, infos: list[dict[str, Any]]) -> list[str]:
    """Which card ran which rank: the physical card from CUDA_VISIBLE_DEVICES, and its name."""
    if device == "cpu":
        return [f"rank {rank}: cpu (gloo)" for rank in range(world_size)]
    visible = [part.strip() for part in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    lines = []
    for rank in range(world_size):
        card = visible[rank] if rank < len(visible) else str(rank)
        info = infos[rank] if rank < len(infos) else {}
        name = str(info.get("gpu", "")) or "GPU"
        uuid = str(info.get("uuid", ""))
        lines.append(f"rank {rank}: cuda:{rank} = card {card}, {name}" + (f" ({uuid})" if uuid else ""))
    return lines


class Groups:
    """The job's groups of rank processes, one at a time: the tests' and, in ranked mode, a
    fresh one for each round where time allows. Their output is kept in order."""

    def __init__(self, spec: JobSpec, workspace: Workspace, result: Result, device: str, deadline: float) -> None:
        self.spec, self.workspace, self.result, self.device, self.deadline = spec, workspace, result, device, deadline
        self.current: RankGroup | None = None
        self.started = 0  # groups started so far: the current one's number
        self.startup_s = 0.0  # the first group's start, until its ranks were ready
        self._outputs: list[tuple[str, str]] = []
        self.restarts: list[str] = []  # why a group was started again (``start``)

    def start(self) -> RankGroup:
        """End the current group, if any, and start a new one with the submission loaded.

        A group whose ranks crash or fail to join each other before the submission is imported
        into them (``_start``'s "while starting": the ranks' start-up and their rendezvous) is
        started once more per job, where the time left allows: nothing of the submission's has
        run in those processes, so it is not its verdict (JOURNAL.md, Multi-GPU jobs on GPUs)."""
        self.finish()
        begun = time.monotonic()
        try:
            group = self._start_one()
        except RunEnded as ended:
            if not self._may_start_again(ended):
                raise
            self.restarts.append(ended.verdict)
            self.finish()
            group = self._start_one()
        if not self.startup_s:
            self.startup_s = time.monotonic() - begun
        return group

    def _start_one(self) -> RankGroup:
        group = RankGroup(self.workspace, self.spec.task.world_size, self.device, self.deadline, self.spec.timeout_s)
        self.current = group
        self.started += 1
        group.start()
        _start(self.spec, self.workspace, group, self.result, self.device)
        return group

    def _may_start_again(self, ended: RunEnded) -> bool:
        group = self.current
        failed_early = group is not None and group.activity == STARTING
        left_s = self.deadline - time.monotonic()
        needed_s = FRESH_STARTS_NEEDED * self.startup_s
        return failed_early and may_start_again(ended, bool(self.restarts), left_s, needed_s)

    def startup_estimate(self) -> float:
        return FRESH_STARTS_NEEDED * self.startup_s

    def fresh_affordable(self, needed_after_s: float = 0.0) -> bool:
        return self.deadline - time.monotonic() >= self.startup_estimate() + needed_after_s

    def fresh(self, round_number: int) -> RankGroup:
        return self.start()

    def finish(self) -> None:
        if self.current is None:
            return
        group, self.current = self.current, None
        group.finish()
        self._outputs.append(group.output_text())

    def output_text(self) -> tuple[str, str]:
        """Every group's output; where there were several, each headed by its number. Where a
        group was started again, its stderr says why first."""
        if len(self._outputs) == 1 and not self.restarts:
            return self._outputs[0]
        stdout, stderr = (
            "".join(f"[ranks started {n + 1}]\n{pair[which]}" for n, pair in enumerate(self._outputs) if pair[which])
            for which in (0, 1)
        )
        said = started_again_note("the ranks were", self.restarts)
        return stdout, said + stderr


def run(spec: JobSpec, workspace: Workspace, result: Result, emit: Emit, deadline: float) -> None:
    world_size = spec.task.world_size
    device = resolve_device(spec)
    groups = Groups(spec, workspace, result, device, deadline)
    try:
        group = groups.start()
        seeds = SeedPlan(spec.secret_seed if spec.mode is Mode.RANKED else None)
        _run_tests(spec, group, seeds, result, emit)
        if spec.mode in (Mode.TEST, Mode.PROFILE):
            result.status = Status.PASSED
            result.verdict = f"all {len(result.tests)} tests passed on {world_size} ranks"
            if spec.mode is Mode.PROFILE:
                result.verdict += " (profile mode is not available for multi-GPU leaderboards: tests only)"
            return
        _run_benchmarks(spec, groups, seeds, result, emit, deadline)
    finally:
        groups.finish()
        result.stdout, result.stderr = (text[-16 * 1024 :] for text in groups.output_text())


def _start(spec: JobSpec, workspace: Workspace, group: RankGroup, result: Result, device: str) -> None:
    from kernelcup.harness import sysinfo

    assert group.ranks is not None and group.checkers is not None
    group.activity = STARTING
    group.gather(group.ranks, ("started",))
    port = free_port()
    order = protocol.Load(
        op="load", workdir=str(workspace.work), submission=spec.submission_name, env=build_cache_env(spec, workspace),
        rendezvous={"world_size": group.world_size, "port": port, "timeout_s": spec.timeout_s + 60},
    )
    group.tell(group.ranks, [order] * group.world_size)
    group.gather(group.checkers, ("ready",))
    group.gather(group.ranks, ("loading",))
    group.activity = "while loading the submission"
    ready = group.gather(group.ranks, ("ready",))
    infos = [dict(message.get("info") or {}) for message, _ in ready]
    result.system = sysinfo.collect(device, infos[0], None)
    result.system.isolation = ", ".join(
        part for part in (workspace.isolation(), str(infos[0].get("isolation", ""))) if part
    )
    result.system.ranks = rank_cards(group.world_size, device, infos)


def _rank_kwargs(kwargs: dict[str, Any], world_size: int) -> list[dict[str, Any]]:
    base = {"world_size": world_size, **kwargs}
    return [{**base, "rank": rank} for rank in range(world_size)]


def _checked_call(group: RankGroup, per_rank: list[dict[str, Any]], run: bool) -> list[tuple[bool, str]]:
    """Run one checked call on every rank (``run``; else ship the last timed call's output) and
    judge each rank's output with the reference ranks."""
    assert group.ranks is not None and group.checkers is not None
    group.tell(group.checkers, [{"op": "generate", "kwargs": kw} for kw in per_rank])
    if run:
        group.tell(group.ranks, [protocol.Run(op="run", kwargs=kw) for kw in per_rank])
    else:
        group.tell(group.ranks, [protocol.Ship(op="ship")] * group.world_size)
    shipped = group.gather(group.ranks, ("output", "bad_output"))
    generated = group.gather(group.checkers, ("generated",))
    verdicts: list[tuple[bool, str]] = [(True, "")] * group.world_size
    orders: list[dict[str, Any]] = []
    payloads: list[bytes | None] = []
    for rank, ((message, payload), (made, _)) in enumerate(zip(shipped, generated, strict=True)):
        if message.get("msg") == "bad_output":
            verdicts[rank] = (False, str(message.get("error", "bad output"))[:600])
        elif run and not fp.same(message.get("fingerprint"), made.get("fingerprint")):
            verdicts[rank] = (False, "custom_kernel received inputs that differ from the generated ones "
                                     "(tampered with before the call)")
        usable = verdicts[rank][0]
        orders.append({"op": "check", "tree": message.get("tree") if usable else None,
                       "placements": message.get("placements") if usable else None})
        payloads.append(payload if usable else None)
    group.tell(group.checkers, orders, payloads)
    checked = group.gather(group.checkers, ("checked",))
    for rank, (message, _) in enumerate(checked):
        if verdicts[rank][0]:
            verdicts[rank] = (bool(message.get("ok")), str(message.get("message", "")))
    return verdicts


def _summary(verdicts: list[tuple[bool, str]]) -> tuple[bool, str]:
    wrong = [f"rank {rank}: {message or 'wrong output'}" for rank, (ok, message) in enumerate(verdicts) if not ok]
    return (not wrong), "; ".join(wrong)[:1200]


def _run_tests(spec: JobSpec, group: RankGroup, seeds: SeedPlan, result: Result, emit: Emit) -> None:
    cases = spec.task.tests
    total = len(cases)
    first_failure = ""
    emit(Progress("testing", 0, total))
    for index, case in enumerate(cases):
        kwargs = seeds.case(case, "test")
        label = f"test {index + 1} of {total} ({describe_case(kwargs)})"
        group.activity = f"in {label}"
        ok, message = _summary(_checked_call(group, _rank_kwargs(kwargs, group.world_size), True))
        result.tests.append(CaseResult(case=kwargs, passed=ok, message=message))
        emit(Progress("testing", index + 1, total))
        if not ok and not first_failure:
            first_failure = f"{label} failed: {message}"
    if first_failure:
        raise RunEnded(Status.FAILED, first_failure)


def _timed_call(group: RankGroup, per_rank: list[dict[str, Any]]) -> list[float]:
    """One barrier-aligned call on every rank: each rank's time in ns."""
    assert group.ranks is not None
    group.tell(group.ranks, [protocol.TimeRank(op="time_rank", kwargs=kw) for kw in per_rank])
    times = []
    for rank, (message, _) in enumerate(group.gather(group.ranks, ("timed",))):
        value = message.get("time_ns")
        if not isinstance(value, int | float) or not 0 <= value < 1e15:
            raise RunEnded(Status.FAILED, f"rank {rank}'s process sent impossible timings {group.activity}")
        if message.get("complete") is False:
            raise RunEnded(Status.FAILED, f"rank {rank}'s GPU record was switched off inside its call {group.activity}")
        times.append(float(value))
    return times


def _time_case(
    spec: JobSpec, group: RankGroup, seeds: SeedPlan, case: dict[str, Any], label: str, seconds: float,
    rng: random.Random, round_index: int = 0,
) -> tuple[list[float], list[list[float]]]:
    """One case's timed calls (each its slowest rank's time) and every rank's own, in ns.

    The first call's check, which every round makes, is outside the case's time: a check ships
    every rank's output to the reference ranks, through the host where CUDA IPC is unavailable,
    and on two H200s that one check left 16 Mi and 64 Mi all-reduces two timed calls per round
    (BENCHMARKS.md, twenty-first session). The rechecks drawn after it count, as in a single-GPU
    case: which calls are checked never depends on what checks cost. Each round draws its own
    inputs, as single-GPU rounds do."""
    ranked = spec.mode is Mode.RANKED
    plan = RANKED_PLAN if ranked else BENCHMARK_PLAN
    tag = f"-round{round_index}" if round_index else ""
    group.activity = f"while warming up {label}"
    for index in range(WARMUP_CALLS.get(spec.mode, 3)):
        _timed_call(group, _rank_kwargs(seeds.case(case, "warmup" + tag, index), group.world_size))
    group.activity = f"in {label}"
    calls: list[float] = []
    per_rank: list[list[float]] = [[] for _ in range(group.world_size)]
    elapsed_s = 0.0
    index = 0
    while True:
        kwargs = seeds.case(case, "bench" + tag, index)
        began = time.monotonic()
        times = _timed_call(group, _rank_kwargs(kwargs, group.world_size))
        if index == 0 or rng.random() < plan.recheck_probability:
            checking = time.monotonic()
            ok, message = _summary(_checked_call(group, _rank_kwargs(kwargs, group.world_size), False))
            if index == 0:
                began += time.monotonic() - checking
            if not ok:
                raise RunEnded(Status.FAILED, f"{label} (timed call {index + 1}) gave a wrong answer: {message}")
        elapsed_s += time.monotonic() - began
        calls.append(max(times))
        for rank, value in enumerate(times):
            per_rank[rank].append(value)
        index += 1
        if stats.should_stop(calls, elapsed_s, plan.rule) or (elapsed_s >= seconds and index >= 2):
            break
    return calls, per_rank


def _slowest_rank(result: CaseResult) -> None:
    """Say which rank was the slowest where the ranks' medians differ by more than 5%."""
    medians = result.rank_median_ns
    if medians and max(medians) > 1.05 * min(medians):
        slowest = max(range(len(medians)), key=lambda rank: medians[rank])
        said = f"rank {slowest} was the slowest ({format_seconds(medians[slowest] * 1e-9)} median)"
        result.message = f"{result.message}; {said}" if result.message else said


def _run_benchmarks(
    spec: JobSpec, groups: Groups, seeds: SeedPlan, result: Result, emit: Emit, deadline: float
) -> None:
    """Time every case, each call as its slowest rank's; ranked: in rounds, each with its ranks
    started afresh where time allows (``harness/rounds.py``)."""
    cases = spec.task.benchmarks
    if not cases:
        raise RunEnded(Status.ERROR, "the leaderboard defines no benchmarks")
    rng = random.Random(os.urandom(16))
    ranked = spec.mode is Mode.RANKED
    plan = RANKED_PLAN if ranked else BENCHMARK_PLAN
    rounds = Rounds(len(cases), stats.RANKED_ROUNDS if ranked else 1, deadline, spec.timeout_s, groups, emit)
    labels = [f"benchmark {i + 1} of {len(cases)} ({describe_case(case)})" for i, case in enumerate(cases)]

    def time_one(round_index: int, index: int, seconds: float, fresh: bool) -> CaseTiming:
        label = labels[index]
        if rounds.rounds > 1:
            label += f", round {round_index + 1}" + (" (ranks started afresh)" if fresh else "")
        group = groups.current
        assert group is not None
        calls, ranks = _time_case(spec, group, seeds, cases[index], label, min(plan.rule.max_seconds, seconds), rng,
                                  round_index)
        summary = stats.summarize(calls)
        return CaseTiming(stats.case_result(cases[index], summary), summary.median * 1e-9, calls,
                          process=groups.started, rank_median_ns=[stats.median(sorted(values)) for values in ranks])

    timings = rounds.run(time_one, lambda case_timings: not benchmark.rounds_agree(case_timings))
    medians: list[float] = []
    for index, case in enumerate(cases):
        combined = benchmark.combine_rounds(timings[index], None, case, spec.gpu, groups.device, labels[index], 0)
        _slowest_rank(combined.result)
        result.benchmarks.append(combined.result)
        medians.append(combined.median_s)
    score_s = scoring.score(result, spec.task.ranking_by, medians)
    result.status = Status.PASSED
    what = "ranked score" if ranked else "score"
    result.verdict = (
        f"all {len(result.tests)} tests passed on {spec.task.world_size} ranks; {what} "
        f"{format_seconds(score_s)} ({spec.task.ranking_by} of {len(medians)} benchmark medians, "
        "each call timed as its slowest rank)"
    )
    result.verdict += rounds.shortfall()
