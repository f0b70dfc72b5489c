"""The ``Runner`` protocol: what every back end (local subprocess, Modal, GitHub Actions) does.

A runner takes a job spec and returns the harness's result; it reports progress while it runs
and can be cancelled. Which GPU goes to which runner lives in config.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kernelcup.core.config import Settings
from kernelcup.harness.spec import JobSpec, Progress, Result

ProgressCallback = Callable[[Progress], Awaitable[None]]
RefCallback = Callable[[str], Awaitable[None]]


@dataclass(frozen=True)
class RunContext:
    """What a runner learns about the job besides the spec."""

    job_id: int
    gpu: str
    limit_s: float  # the runner's own limit: always longer than spec.timeout_s (kernelcup.core.pipeline.timeouts)
    runner_ref: str | None = None  # set when re-attaching to work started before a restart
    # A remote runner calls this as soon as it has a reference to its work (a Modal call id, a
    # workflow run), so the job row keeps it and a restarted bot re-attaches instead of repeating.
    remember_ref: RefCallback | None = None


class RunnerError(Exception):
    """The runner could not produce a result (the harness died, the platform failed)."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@runtime_checkable
class Runner(Protocol):
    """A back end that runs the harness. Optional hooks, called when present:
    ``async start(one_shot: bool = False)`` when the bot starts (``one_shot``: the process runs
    one submission and exits, so keep nothing ready after it) and ``async aclose()`` when it
    stops."""

    name: str

    def gpus(self) -> list[str]:
        """The GPU names this runner can serve now (registry names such as "H100", or "cpu")."""
        ...

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        """Run the harness; raise RunnerError when no result could be had."""
        ...

    async def cancel(self, job_id: int) -> None:
        """Stop a job this runner is running; a no-op when it is not."""
        ...


def runners_by_gpu(settings: Settings, runners: Mapping[str, Runner]) -> dict[str, Runner]:
    """GPU name -> the runner the registry names for it, where that runner serves it here."""
    return {
        gpu: runners[config.runner]
        for gpu, config in settings.gpus.items()
        if config.runner in runners and gpu in runners[config.runner].gpus()
    }
