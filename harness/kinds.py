"""The kinds of job behind one protocol: which kind runs a spec, and how.

A CUDA source (``cuda_eval``), a multi-GPU Python job (``multi_gpu``), a Python job whose
leaderboard brings its own evaluator (``own_eval``) and a Python job (``run.PythonJob``). Each kind
runs its job into the job's ``Result``; the first kind of ``run.KINDS`` that wants a spec runs it.
A kind that starts processes of its own ends the Python process the harness prepared before it
had a job (``run.Prepared``). Each kind's module is imported only when a job of it runs, so a
harness starts with none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kernelcup.harness.evaluators import uses_own_evaluator
from kernelcup.harness.process import Child
from kernelcup.harness.reporting import Emit
from kernelcup.harness.spec import JobSpec, Result
from kernelcup.harness.workspace import Workspace


class PreparedProcess(Protocol):
    """The Python process the harness started before it had a job (``run.Prepared``)."""

    child: Child | None

    def discard_child(self) -> None:
        """End it: the job's kind starts processes of its own."""


@dataclass(frozen=True)
class Job:
    """What every kind is given: the spec, where it runs, and where its result goes."""

    spec: JobSpec
    workspace: Workspace
    prepared: PreparedProcess
    result: Result
    emit: Emit
    deadline: float  # time.monotonic() by which the job's work ends
    started: float  # time.monotonic() when the spec arrived


class JobKind(Protocol):
    def wants(self, spec: JobSpec) -> bool:
        """Whether this kind runs ``spec``."""

    def run(self, job: Job) -> None:
        """Run the job into ``job.result``; raise ``RunEnded`` where it ends early."""


@dataclass(frozen=True)
class ProcessesOfItsOwn:
    """A kind whose module starts the submission's processes itself: the compiled binary of a
    CUDA source, one process per rank (``harness/rank_group.py``), or the leaderboard's own
    evaluator, which imports the submission. Its module's ``run(spec, workspace, result, emit,
    deadline)`` runs the job."""

    module: str
    wanted: Callable[[JobSpec], bool]

    def wants(self, spec: JobSpec) -> bool:
        return self.wanted(spec)

    def run(self, job: Job) -> None:
        job.prepared.discard_child()
        kind = importlib.import_module(f"kernelcup.harness.{self.module}")
        kind.run(job.spec, job.workspace, job.result, job.emit, job.deadline)


CUDA_SOURCE = ProcessesOfItsOwn("cuda_eval", lambda spec: spec.task.lang == "cu")
MULTI_GPU = ProcessesOfItsOwn(
    "multi_gpu", lambda spec: spec.task.lang == "py" and spec.task.world_size > 0
)
OWN_EVALUATOR = ProcessesOfItsOwn(
    "own_eval", lambda spec: spec.task.lang == "py" and uses_own_evaluator(spec.task, spec.files)
)
