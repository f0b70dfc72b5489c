"""The submission's processes of one Python job, one at a time.

A GPU can run a kernel a few percent faster or slower for the whole life of a process, while
rounds inside one process agree (JOURNAL.md, Ranked rounds in fresh processes). Rounds that
share a process share its mode, so a ranked run times each round in a fresh process, the first
round too (not in the process that ran the tests, whose compiles and caches were made for the
tests' sizes): each one started, loaded and waited for *between* rounds, never while a round is
being timed (it would compete for the CPU and the GPU). Each start-up counts against the job's
budget; where too little is left for one, the round runs in the current process.

Every process is brought up the same way (``load`` order, ``ready``) in the same workspace and
sandbox, and learns no more than the first: seeds still come one at a time with each order.

A process that crashes or errs while starting, before it is sent ``load``, has run nothing of
the submission's: it is started once more per job where time allows (as a group of ranks is,
``harness/multi_gpu.py``), and the job's stderr says so.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kernelcup.harness import protocol
from kernelcup.harness.process import PROFILE_ENV, PYTHON_FLAGS, Child, child_environment, spawn
from kernelcup.harness.reporting import attach_process_outputs
from kernelcup.harness.spec import JobSpec, Result, Status
from kernelcup.harness.verdict import RunEnded
from kernelcup.harness.workspace import Workspace, build_cache_env

if TYPE_CHECKING:
    from kernelcup.harness.session import Session

# A fresh process is started only where its start-up leaves at least this share of the time
# left for timing; otherwise the round runs in the current process (and the case says so).
FRESH_MAX_SHARE = 0.5
# Ranked rounds' processes start beside the first one (``Children.prestart``) where the machine
# has this many cores: their start-ups (torch's import, the CUDA context: seconds each on a GPU)
# then overlap the first process's and its tests instead of following one another between rounds
# (JOURNAL.md, CUPTI itself, rounds started ahead, shorter ranked rounds).
# ``KERNELCUP_HARNESS_PRESTART=0`` or ``=1`` decides outright.
PRESTART_MIN_CPUS = 8
PRESTART_ENV = "KERNELCUP_HARNESS_PRESTART"
# A process (or a group of ranks, harness/multi_gpu.py) that died while starting is started again
# only with at least this much of the job's time left.
MIN_RESTART_S = 30.0


def time_share(left_s: float, slots_left: int, starts_left: int, startup_s: float) -> float:
    """Seconds for the next case of a round: 85% of the time left, less the start-ups still to
    come, split over the cases still to time."""
    return 0.85 * max(0.0, left_s - starts_left * startup_s) / max(1, slots_left)


def fresh_fits(left_s: float, startup_s: float, needed_after_s: float = 0.0) -> bool:
    """Whether a start-up of ``startup_s`` fits in ``left_s`` with ``needed_after_s`` to spare and
    leaves at least ``1 - FRESH_MAX_SHARE`` of the time for timing."""
    return startup_s <= FRESH_MAX_SHARE * left_s and startup_s + needed_after_s <= left_s


def may_start_again(ended: RunEnded, restarted: bool, left_s: float, needed_s: float) -> bool:
    """Whether a process or a group of ranks that ended with ``ended`` while starting (before
    the submission was loaded into it) is started once more: once per job, for a crash or an
    error that another start could escape (not ``ended.repeats``), with ``needed_s`` and at
    least ``MIN_RESTART_S`` of the job's time left."""
    return (
        not restarted
        and not ended.repeats
        and ended.status in (Status.CRASHED, Status.ERROR)
        and left_s >= max(needed_s, MIN_RESTART_S)
    )


def prestart_wanted() -> bool:
    told = os.environ.get(PRESTART_ENV, "")
    if told in ("0", "1"):
        return told == "1"
    return (os.cpu_count() or 1) >= PRESTART_MIN_CPUS


def started_again_note(what_was: str, restarts: list[str]) -> str:
    """The lines that head a job's stderr where something was started again ("the ranks were"),
    one for each why."""
    return "".join(f"[kernelcup: {what_was} started again after: {why}]\n" for why in restarts)


def start_python_child(workspace: Workspace, device: str) -> Child:
    """Start the submission's process in ``workspace`` for ``device``; it waits for ``load``."""
    sandboxed = workspace.sandbox is not None
    profiled = ["-m", "cProfile", "-s", "cumulative"] if os.environ.get(PROFILE_ENV) == "1" else []
    command = [
        sys.executable,
        *PYTHON_FLAGS,
        *profiled,
        "-m",
        "kernelcup.harness.child",
        "{fd}",
        # In the sandbox the child is PID 1 of its namespace and dies with the launcher chain.
        "0" if sandboxed else str(os.getpid()),
        device,
        "1" if workspace.identity.userns else "0",
    ]
    env = child_environment(workspace.home, {})
    return spawn(command, workspace.work, workspace.identity, env, workspace.sandbox)


def load_order(spec: JobSpec, workspace: Workspace) -> protocol.Load:
    """The child's ``load`` order: where the job is, and the per-submission build caches."""
    return protocol.Load(op="load", workdir=str(workspace.work), submission=spec.submission_name,
                         env=build_cache_env(spec, workspace))


def wanted(spec_device: str, started: str) -> bool:
    return spec_device == "auto" or spec_device == started


class ChildSlot(Protocol):
    """Where the job's clean-ups look for its live process (``run.Prepared``)."""

    child: Child | None


@dataclass
class Process:
    """One of the job's processes: its conversation, and how long it took to become ready."""

    child: Child
    session: Session
    started_for: int  # the round it was started for (0: the first process, which ran the tests)
    startup_s: float | None = None
    ended: bool = False
    started_again: bool = False  # it replaces one that died while starting
    ahead: bool = False  # started ahead of its round (``Children.prestart``): only adopted when it came

    @property
    def label(self) -> str:
        label = "the first process" if self.started_for == 0 else f"a fresh process for round {self.started_for}"
        if self.ahead:
            label += ", started ahead"
        return f"{label}, started again" if self.started_again else label


class Children:
    """Owns the job's current submission process and ends every one it started.

    ``prepared.child`` always names the live process, so the paths that end a job without
    reaching :meth:`close` (``run_job``'s and ``__main__``'s clean-ups) still kill it.
    """

    def __init__(self, spec: JobSpec, workspace: Workspace, prepared: ChildSlot, deadline: float) -> None:
        self.spec = spec
        self.workspace = workspace
        self.prepared = prepared
        self.deadline = deadline
        self.processes: list[Process] = []
        self._load_sent = 0.0
        self._reported_startup_s = 0.0
        self.restarts: list[str] = []  # why a process was started again (``_started``)
        self._waiting: dict[int, Child] = {}  # started ahead for a round (``prestart``), not yet used

    @property
    def current(self) -> Process:
        return self.processes[-1]

    @property
    def session(self) -> Session:
        return self.current.session

    def _session(self, child: Child) -> Session:
        from kernelcup.harness.session import Session

        return Session(child, self.deadline, self.spec.timeout_s, device="cpu")

    def _adopt(self, child: Child, started_for: int, ahead: bool = False) -> Process:
        self.prepared.child = child
        process = Process(child, self._session(child), started_for, ahead=ahead)
        self.processes.append(process)
        return process

    def _spawn(self, started_for: int) -> Process:
        try:
            child = start_python_child(self.workspace, self.spec.device)
        except OSError as exc:
            for_round = f" for round {started_for}" if started_for else ""
            raise RunEnded(Status.ERROR, f"could not start the submission's process{for_round}: {exc}") from None
        return self._adopt(child, started_for)

    def _started(self, process: Process) -> tuple[Process, str]:
        """Wait for ``process`` to start up: the live process, and the device it reports.

        One that crashes or errs here has not been sent ``load``: nothing of the submission's
        ran in it, so the failure is not the submission's verdict. It is started once more per
        job where time allows, and stays among :attr:`processes` (its output is the job's)."""
        try:
            return process, process.session.wait_started()
        except RunEnded as ended:
            if not self._may_start_again(ended):
                raise
            self.restarts.append(f"{ended.verdict} ({process.label})")
            self._end(process)
        again = self._spawn(process.started_for)
        again.started_again = True
        return again, again.session.wait_started()

    def _may_start_again(self, ended: RunEnded) -> bool:
        """Where another start fits as a fresh process's must (:func:`fresh_fits`)."""
        left_s = self.deadline - time.monotonic()
        return may_start_again(ended, bool(self.restarts), left_s, self.startup_estimate() / FRESH_MAX_SHARE)

    def start(self, prestart_rounds: int = 0) -> Session:
        """The first process (the prepared one where it was started for this device), told its
        job; :meth:`wait_ready` waits for it, so the harness can read the leaderboard meanwhile.
        The processes of ``prestart_rounds`` rounds start beside it (:meth:`prestart`)."""
        process = self._spawn(0) if self.prepared.child is None else self._adopt(self.prepared.child, 0)
        self.prestart(prestart_rounds)
        process, device = self._started(process)
        if not wanted(self.spec.device, device):  # a standby for another device
            self._end(process)
            self.processes.remove(process)
            process, _ = self._started(self._spawn(0))
        self._reported_startup_s = process.session.startup_s
        self._load_sent = time.monotonic()
        process.session.load(load_order(self.spec, self.workspace))
        return process.session

    def prestart(self, rounds: int) -> None:
        """Start the processes of rounds 1 to ``rounds`` now, while the first one starts and runs
        the tests, never while a round is timed: each waits, started up and idle, until
        :meth:`fresh` takes it and tells it to load the submission. Only where
        :func:`prestart_wanted`."""
        if not prestart_wanted():
            return
        for number in range(1, rounds + 1):
            try:
                self._waiting[number] = start_python_child(self.workspace, self.spec.device)
            except OSError:
                return  # :meth:`fresh` starts it then, and says why where that fails too

    def wait_ready(self) -> Session:
        session = self.session
        session.wait_ready()
        # The first process may have started long before the job (a standby): its own start-up
        # as it measured it, plus loading the submission.
        self.current.startup_s = self._reported_startup_s + (time.monotonic() - self._load_sent)
        return session

    def startup_estimate(self) -> float:
        """Seconds a fresh process is expected to take: the last one measured that started
        when it was asked for. A process started ahead (:meth:`prestart`) was ready in a fraction
        of that, and a round it was not started for (the extra round) starts from nothing: on an
        H200, 0.2 s against 4.7 s (BENCHMARKS.md, twenty-first session)."""
        measured = [p.startup_s for p in self.processes if p.startup_s is not None and not p.ahead]
        return measured[-1] if measured else 0.0

    def fresh_affordable(self, needed_after_s: float = 0.0) -> bool:
        """Whether a fresh process fits in the time left, with ``needed_after_s`` still to spare."""
        return fresh_fits(self.deadline - time.monotonic(), self.startup_estimate(), needed_after_s)

    def fresh(self, round_number: int) -> Session:
        """End the current process and bring up a new one for ``round_number``, as the first was."""
        device = self.session.device
        begun = time.monotonic()
        self._end(self.current)
        earlier = "the tests and the earlier rounds" if round_number > 1 else "the tests"
        where = f"in a fresh process started for round {round_number} of the benchmarks ({earlier} ran in another)"
        waiting = self._waiting.pop(round_number, None)
        process = self._adopt(waiting, round_number, ahead=True) if waiting is not None else self._spawn(round_number)
        try:
            process, _ = self._started(process)
            process.session.load(load_order(self.spec, self.workspace))
            process.session.wait_ready()
        except RunEnded as ended:
            raise RunEnded(ended.status, f"{ended.verdict}, {where}") from None
        if process.session.device != device:
            raise RunEnded(
                Status.ERROR, f"the submission's process ran on {process.session.device}, not {device}, {where}"
            )
        process.startup_s = time.monotonic() - begun
        return process.session

    def _end(self, process: Process) -> None:
        if process.ended:
            return
        try:
            process.session.exit()
            process.child.finish(spare={child.popen.pid for child in self._waiting.values()})
            process.ended = True
        finally:
            process.session.close()
            if process.ended and self.prepared.child is process.child:
                self.prepared.child = None

    def close(self, result: Result) -> None:
        """End every process (whatever happened) and put each one's output in ``result``; where
        one was started again, the stderr says why first."""
        error: BaseException | None = None
        for process in self.processes:
            try:
                self._end(process)
            except BaseException as exc:  # end the others all the same
                error = error or exc
        for child in self._waiting.values():  # started ahead for a round that never ran
            try:
                child.finish()
            except BaseException as exc:
                error = error or exc
        self._waiting.clear()
        try:
            many = len(self.processes) > 1
            attach_process_outputs(
                result,
                [
                    (
                        f"process {number} of {len(self.processes)}: {process.label}" if many else "",
                        process.child.stdout,
                        process.child.stderr,
                    )
                    for number, process in enumerate(self.processes, 1)
                ],
            )
            said = started_again_note("the submission's process was", self.restarts)
            if said:
                result.stderr = said + result.stderr
                if "stderr.txt" in result.files:
                    result.files["stderr.txt"] = said + result.files["stderr.txt"]
        finally:
            if error is not None:
                raise error
