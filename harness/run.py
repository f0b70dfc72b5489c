"""Running one job: lay out the files, start the submission's process, run the mode, report.

``run_job`` never raises for anything a submission or a leaderboard can do; every way a run
can end becomes a :class:`~kernelcup.harness.spec.Result` with a status and a one-line verdict. The
submission's process is started first (:func:`prepare`, before the spec is even read), so its
torch import and CUDA start-up overlap the harness's own, and a runner that starts the harness
ahead of a job finds both warm.
"""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kernelcup.harness import protocol, scoring, stats
from kernelcup.harness.children import Children, ChildSlot, start_python_child
from kernelcup.harness.kinds import CUDA_SOURCE, MULTI_GPU, OWN_EVALUATOR, Job, JobKind
from kernelcup.harness.process import Child, Identity, child_identity
from kernelcup.harness.reporting import Emit
from kernelcup.harness.rounds import Rounds
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.spec import CaseResult, JobSpec, Mode, Progress, Result, Status
from kernelcup.harness.verdict import RunEnded, describe_case, format_seconds
from kernelcup.harness.workspace import Workspace, WorkspaceError

if TYPE_CHECKING:
    from kernelcup.harness.session import Session, Shipped

MAX_OUTPUT_PAYLOAD = 2 << 30


def reserve_s(timeout_s: float) -> float:
    """Time kept back from the budget to stop the child and write the result."""
    return min(2.0, 0.1 * timeout_s)


@dataclass
class Prepared:
    """What the harness sets up before it has a job: the directories and a warm child.

    A runner may start ``python -m kernelcup.harness`` ahead of the job (a standby), so by the time the
    spec arrives the submission's process has imported torch and created its CUDA context.
    Nothing of a job is in here: the child learns its job only from the ``load`` order.
    """

    identity: Identity
    workspace: Workspace | None
    child: Child | None
    error: str = ""
    warming: threading.Thread | None = None  # imports a leaderboard's check may need (harness/__main__.py)

    def discard_child(self) -> None:
        if self.child is not None:
            with contextlib.suppress(OSError):
                self.child.channel.send(protocol.Exit(op="exit"))
            self.child.finish()
            self.child = None


def refusal(reason: str) -> str:
    """The verdict of a job this machine cannot run safely."""
    return (
        f"this machine cannot sandbox submissions ({reason}), so the job was refused; the operator can "
        "run the runner as root or allow user namespaces, or set KERNELCUP_HARNESS_SANDBOX=off on a "
        "machine that only runs trusted code"
    )


def prepare(device: str = "auto") -> Prepared:
    """Lay out empty directories and start the submission's process in them, for ``device``."""
    identity = child_identity()
    try:
        workspace = Workspace.prepare(identity)
    except OSError as exc:
        return Prepared(identity, None, None, f"could not create the job's directories: {exc}")
    if identity.refused:
        return Prepared(identity, workspace, None, refusal(identity.refused))
    try:
        child = start_python_child(workspace, device)
    except OSError as exc:
        return Prepared(identity, workspace, None, f"could not start the submission's process: {exc}")
    return Prepared(identity, workspace, child)


def run_job(spec: JobSpec, emit: Emit, started: float | None = None, prepared: Prepared | None = None) -> Result:
    """Run ``spec``; ``started`` is when the spec arrived (the budget counts from it)."""
    started = time.monotonic() if started is None else started
    result = Result(job_id=spec.job_id, mode=spec.mode, status=Status.ERROR, verdict="")
    deadline = started + spec.timeout_s - reserve_s(spec.timeout_s)
    prepared = prepared or prepare(spec.device)
    if prepared.warming is not None:
        # Before any of the job's own imports (the leaderboard's reference may import the same
        # modules in another order, which two threads can turn into a half-imported module) and
        # before any timed call (the harness's clock checks them).
        prepared.warming.join()
    result.system.isolation = prepared.identity.description
    workspace = prepared.workspace
    if prepared.identity.refused:
        prepared.error = refusal(prepared.identity.refused)
    if workspace is None or prepared.identity.refused or (prepared.error and spec.task.lang == "py"):
        prepared.discard_child()
        if workspace is not None:
            workspace.cleanup()
        result.verdict = prepared.error
        return result
    try:
        workspace.fill(spec)
    except (WorkspaceError, OSError) as exc:
        prepared.discard_child()
        workspace.cleanup()
        result.verdict = f"could not lay out the leaderboard's files: {exc}"
        return result
    try:
        if spec.submission_name not in spec.files:
            raise RunEnded(Status.ERROR, f"the job has no submission file {spec.submission_name!r}")
        kind = next((kind for kind in KINDS if kind.wants(spec)), None)
        if kind is None:
            raise RunEnded(Status.ERROR, f"unknown leaderboard language {spec.task.lang!r}")
        kind.run(Job(spec, workspace, prepared, result, emit, deadline, started))
    except RunEnded as ended:
        result.status = ended.status
        result.verdict = ended.verdict
    finally:
        ending = time.monotonic()
        prepared.discard_child()
        tidied = time.monotonic()
        workspace.cleanup()
        now = time.monotonic()
        result.duration_s = now - started
        if result.phases_s:  # a Python job's (the other kinds record none)
            timed = sum(v for k, v in result.phases_s.items() if k in PHASES)
            result.phases_s["closing"] = round(max(0.0, result.duration_s - timed), 3)
            result.phases_s["ending the processes"] = round(tidied - ending, 3)
            result.phases_s["sandbox and build caches"] = round(now - tidied, 3)
    return result


# A Python job's phases, in order (Result.phases_s); "closing" is what followed the last phase.
# Parts of them, also in phases_s: "process start-up" (the submission process's own start:
# interpreter, torch, the device, as it measured it; a standby did it before the job arrived)
# and "submission load" (its import of the problem and the submission) within "ready"; "first
# test" (where first-call compiles land) within "tests"; "ending the processes" and "sandbox and
# build caches" within "closing".
PHASES = ("ready", "tests", "benchmarks")


def _phase(result: Result, name: str, since: float) -> float:
    """Record how long phase ``name`` took since ``since``; the time it ended."""
    now = time.monotonic()
    result.phases_s[name] = round(now - since, 3)
    return now


class PythonJob:
    """A Python job: the submission's process the harness prepared, then a fresh one per ranked round."""

    def wants(self, spec: JobSpec) -> bool:
        return spec.task.lang == "py"

    def run(self, job: Job) -> None:
        _run_python(job.spec, job.workspace, job.prepared, job.result, job.emit, job.deadline, job.started)


# The first kind that wants a spec runs it: the more particular Python kinds before the plain one.
KINDS: tuple[JobKind, ...] = (CUDA_SOURCE, MULTI_GPU, OWN_EVALUATOR, PythonJob())


def _run_python(
    spec: JobSpec,
    workspace: Workspace,
    prepared: ChildSlot,
    result: Result,
    emit: Emit,
    deadline: float,
    started: float,
) -> None:
    children = Children(spec, workspace, prepared, deadline)
    try:
        # Where rounds start ahead, the extra round's process does too: rounds disagree on most
        # boards with a host-paced case, and a cold start in its place cost 4.7 s of a 31 s ranked
        # job on an H200 (BENCHMARKS.md, twenty-first session). Unused, it is ended with the rest.
        ahead = stats.RANKED_ROUNDS + 1 if spec.mode is Mode.RANKED and spec.task.benchmarks else 0
        session = children.start(ahead)
        from kernelcup.harness.problem import Problem, ProblemError

        try:
            problem = Problem(workspace.harness_dir)
        except ProblemError as exc:
            raise RunEnded(Status.ERROR, str(exc)) from None
        children.wait_ready()
        last = _phase(result, "ready", started)
        result.phases_s["process start-up"] = round(session.startup_s, 3)  # its own, maybe before the job
        result.phases_s["submission load"] = round(session.load_s, 3)
        from kernelcup.harness import sysinfo

        nvml = sysinfo.Nvml() if session.device == "cuda" else None
        if nvml is not None:
            nvml.select(str(session.info.get("uuid", "")))
        result.system = sysinfo.collect(session.device, session.info, nvml)
        result.system.isolation = ", ".join(
            part for part in (workspace.isolation(), str(session.info.get("isolation", ""))) if part
        )
        seeds = SeedPlan(spec.secret_seed if spec.mode is Mode.RANKED else None)
        if spec.mode is Mode.PROFILE:
            from kernelcup.harness import profile

            _run_tests(session, problem, seeds, spec, result, emit, last)
            session.exit()
            profile.run(spec, workspace, result, emit, deadline, session.device)
            return
        _run_tests(session, problem, seeds, spec, result, emit, last)
        last = _phase(result, "tests", last)
        if spec.mode is Mode.TEST:
            result.status = Status.PASSED
            result.verdict = f"all {len(result.tests)} tests passed"
            return
        if nvml is not None:
            result.system.sm_clock_mhz_before = nvml.sm_clock_mhz()
        with sysinfo.watching(nvml, result.system):
            _run_benchmarks(children, problem, seeds, spec, result, emit, deadline)
        _phase(result, "benchmarks", last)
        if nvml is not None:
            result.system.sm_clock_mhz_after = nvml.sm_clock_mhz()
    finally:
        result.system.notes = sorted({note for process in children.processes for note in process.session.notes})
        children.close(result)


def _run_tests(
    session: Session, problem: Any, seeds: SeedPlan, spec: JobSpec, result: Result, emit: Emit, began: float
) -> None:
    from kernelcup.harness import checking, transfer
    from kernelcup.harness import fingerprint as fp

    cases = spec.task.tests
    total = len(cases)
    first_failure = ""
    emit(Progress("testing", 0, total))
    for index, case in enumerate(cases):
        kwargs = seeds.case(case, "test")
        label = f"test {index + 1} of {total} ({describe_case(kwargs)})"
        session.activity = f"in {label}"
        session.start_run(kwargs)
        data = _generate(problem, kwargs, session.device, label)
        expected_print = fp.fingerprint(data)
        shipped = session.collect(transfer.payload_limit(MAX_OUTPUT_PAYLOAD, data))
        ok, message = _judge(problem, kwargs, data, expected_print, shipped, session.device, label)
        result.tests.append(CaseResult(case=kwargs, passed=ok, message=message))
        del data, shipped  # before the next case's: two cases' inputs need not fit at once
        checking.release_memory(session.device)
        emit(Progress("testing", index + 1, total))
        if index == 0:
            _phase(result, "first test", began)
        if not ok and not first_failure:
            first_failure = f"{label} failed: {message}"
    if first_failure:
        raise RunEnded(Status.FAILED, first_failure)


def _generate(problem: Any, kwargs: dict[str, Any], device: str, label: str) -> Any:
    try:
        return problem.generate(kwargs, device)
    except Exception as exc:
        if device == "cpu" and "cuda" in str(exc).lower():
            # GPU MODE's references often make their inputs on "cuda" whatever device they get.
            first = str(exc).split(". ")[0].strip().rstrip(".")
            raise RunEnded(
                Status.ERROR,
                f"this leaderboard's generate_input needs a CUDA GPU and this run is on the CPU "
                f"({type(exc).__name__}: {first}); submit it to one of the leaderboard's GPUs",
            ) from None
        raise RunEnded(
            Status.ERROR,
            f"the leaderboard's generate_input failed in {label}: {type(exc).__name__}: {exc}",
        ) from None


def _judge(
    problem: Any,
    kwargs: dict[str, Any],
    data: Any,
    expected_print: Any,
    shipped: Shipped,
    device: str,
    label: str,
) -> tuple[bool, str]:
    from kernelcup.harness import checking
    from kernelcup.harness import fingerprint as fp

    if shipped.error:
        return False, shipped.error
    if not fp.same(shipped.fingerprint, expected_print):
        again = fp.fingerprint(_generate(problem, kwargs, device, label))
        if not fp.same(again, expected_print):
            raise RunEnded(
                Status.ERROR,
                f"the leaderboard's generate_input is not deterministic ({label}): the same seed gave different data",
            )
        return (
            False,
            "custom_kernel received inputs that differ from the generated ones (tampered with before the call)",
        )
    try:
        return checking.check_output(problem, data, shipped.output)
    except checking.LeaderboardFault as exc:
        raise RunEnded(Status.ERROR, f"the leaderboard's check failed in {label}: {exc}") from None


def _run_benchmarks(
    children: Children,
    problem: Any,
    seeds: SeedPlan,
    spec: JobSpec,
    result: Result,
    emit: Emit,
    deadline: float,
) -> None:
    """Time every case; ranked: in rounds, each round in a fresh process where time allows
    (``harness/rounds.py``, ``harness/children.py``)."""
    from kernelcup.harness import benchmark

    cases = spec.task.benchmarks
    if not cases:
        raise RunEnded(Status.ERROR, "the leaderboard defines no benchmarks")
    ranked = spec.mode is Mode.RANKED
    plan = benchmark.RANKED_PLAN if ranked else benchmark.BENCHMARK_PLAN
    rng = random.Random(os.urandom(16))
    rounds = Rounds(len(cases), stats.RANKED_ROUNDS if ranked else 1, deadline, spec.timeout_s, children, emit)

    def time_one(round_index: int, index: int, seconds: float, fresh: bool) -> benchmark.CaseTiming:
        case = cases[index]
        label = f"benchmark {index + 1} of {len(cases)} ({describe_case(case)})"
        if rounds.rounds > 1:
            label += f", round {round_index + 1}" + (" (in a fresh process)" if fresh else "")
        timing = benchmark.time_case(
            children.session, problem, seeds, case, label, plan, seconds, spec.gpu, MAX_OUTPUT_PAYLOAD, rng, round_index
        )
        timing.process = len(children.processes)
        return timing

    timings = rounds.run(time_one, lambda case_timings: not benchmark.rounds_agree(case_timings))
    _score(children, problem, spec, result, timings, rounds.shortfall())


def _score(children: Children, problem: Any, spec: JobSpec, result: Result, timings: list[list[Any]],
           shortfall: str) -> None:
    """Each case's rounds combined into its result, the score over the cases, and the verdict."""
    from kernelcup.harness import benchmark

    cases = spec.task.benchmarks
    ranked = spec.mode is Mode.RANKED
    l2_bytes = benchmark.l2_of(children.session)
    medians: list[float] = []
    for index, case in enumerate(cases):
        label = f"benchmark {index + 1} of {len(cases)} ({describe_case(case)})"
        combined = benchmark.combine_rounds(
            timings[index], problem, case, spec.gpu, children.session.device, label, l2_bytes
        )
        result.benchmarks.append(combined.result)
        medians.append(combined.median_s)
    # Where each process's timed calls ran (harness/cpus.py), as its timing thread read it back.
    cores = [p.session.timing_cores for p in children.processes if p.session.timing_cores]
    result.system.timing_cores = "; ".join(dict.fromkeys(cores))
    score_s = scoring.score(result, spec.task.ranking_by, medians)
    result.status = Status.PASSED
    what = "ranked score" if ranked else "score"
    result.verdict = (
        f"all {len(result.tests)} tests passed; {what} {format_seconds(score_s)} "
        f"({spec.task.ranking_by} of {len(medians)} benchmark medians)"
    )
    result.verdict += shortfall
