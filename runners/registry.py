"""Which runner serves which GPU in this process, from config and the ``kernelcup.runners``
entry points (the built-in runners are found the same way as a third party's).

A runner class is built once, as ``cls(settings)``, and serves the GPUs of the config's registry
that name it *and* that it can serve here (``runner.gpus()``): the local runner serves only the
GPU of this machine. A GPU no runner here serves is left to another process sharing the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any

import structlog

from core.config import Settings
from core.runner import Runner

log = structlog.get_logger(__name__)

GROUP = "kernelcup.runners"
RunnerFactory = Callable[[Settings], Any]


def runner_classes() -> dict[str, RunnerFactory]:
    """Runner names to their classes; one that fails to import is skipped with a warning."""
    found: dict[str, RunnerFactory] = {}
    for entry in entry_points(group=GROUP):
        try:
            found[entry.name] = entry.load()
        except Exception as exc:  # e.g. modal's SDK not installed in this process
            log.warning("runner not loadable", runner=entry.name, error=repr(exc))
    return found


def build_runners(
    settings: Settings, classes: Mapping[str, RunnerFactory] | None = None
) -> dict[str, Runner]:
    """GPU name -> the runner that serves it here, for ``core.jobs.Pipeline``."""
    classes = runner_classes() if classes is None else classes
    built: dict[str, Runner] = {}
    served: dict[str, Runner] = {}
    for gpu, config in settings.gpus.items():
        runner = built.get(config.runner)
        if runner is None:
            factory = classes.get(config.runner)
            if factory is None:
                log.warning("no runner of this name is installed", runner=config.runner, gpu=gpu)
                continue
            runner = built[config.runner] = factory(settings)
            if not isinstance(runner, Runner):
                raise TypeError(f"{factory!r} does not implement core.runner.Runner")
        if gpu in runner.gpus():
            served[gpu] = runner
    log.info("runners ready", gpus={gpu: runner.name for gpu, runner in served.items()})
    return served
