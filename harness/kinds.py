"""The kinds of job behind one protocol: which kind runs a spec, and how.

A CUDA source (``cuda_eval``), a multi-GPU Python job (``multi_gpu``), a Python job whose
leaderboard brings its own evaluator (``own_eval``) and a Python job (``run.PYTHON``). Each kind
runs its job into the job's ``Result``; the first kind of ``run.KINDS`` that wants a spec runs it.
A kind that starts processes of its own ends the Python process the harness prepared before it
had a job (``run.Prepared``). Each kind's module is imported only when a job of it runs, so a
harness starts with none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kernelcup.harness.evaluators import uses_own_evaluator
from kernelcup.harness.reporting import Emit
from kernelcup.harness.spec import JobSpec, Result
from kernelcup.harness.workspace import Workspace

if TYPE_CHECKING:
    from kernelcup.harness.run import Prepared


@dataclass(frozen=True)
class Job:
    """What every kind is given: the spec, where it runs, and where its result goes."""

    spec: JobSpec
    workspace: Workspace
    prepared: Prepared
    result: Result
    emit: Emit
    deadline: float  # time.monotonic() by which the job's work ends
    started: float  # time.monotonic() when the spec arrived


class JobKind(Protocol):
    name: str

    def wants(self, spec: JobSpec) -> bool:
        """Whether this kind runs ``spec``."""

    def run(self, job: Job) -> None:
        """Run the job into ``job.result``; raise ``RunEnded`` where it ends early."""


class CudaSource:
    """A CUDA source: the compiled binary is the submission's process."""

    name = "cuda"

    def wants(self, spec: JobSpec) -> bool:
        return spec.task.lang == "cu"

    def run(self, job: Job) -> None:
        from kernelcup.harness import cuda_eval

        job.prepared.discard_child()
        cuda_eval.run(job.spec, job.workspace, job.result, job.emit, job.deadline)


class MultiGpu:
    """A Python job on several ranks: one process per rank (``harness/rank_group.py``)."""

    name = "multi-GPU"

    def wants(self, spec: JobSpec) -> bool:
        return spec.task.lang == "py" and spec.task.world_size > 0

    def run(self, job: Job) -> None:
        from kernelcup.harness import multi_gpu

        job.prepared.discard_child()
        multi_gpu.run(job.spec, job.workspace, job.result, job.emit, job.deadline)


class OwnEvaluator:
    """A Python job whose leaderboard's evaluator imports the submission itself."""

    name = "own evaluator"

    def wants(self, spec: JobSpec) -> bool:
        return spec.task.lang == "py" and uses_own_evaluator(spec.task, spec.files)

    def run(self, job: Job) -> None:
        from kernelcup.harness import own_eval

        job.prepared.discard_child()
        own_eval.run(job.spec, job.workspace, job.result, job.emit, job.deadline)
