"""Which runner serves which GPU in this process, from config and the ``kernelcup.runners``
entry points (the built-in runners are found the same way as a third party's).

A runner class is built once, as ``cls(settings)``, and serves the GPUs of the config's registry
that name it *and* that it can serve here (``runner.gpus()``): the local runner serves only the
GPU of this machine. A GPU no runner here serves is left to another process sharing the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

import structlog

from core.config import Settings
from core.runner import Runner

log = structlog.get_logger(__name__)

GROUP = "kernelcup.runners"
RunnerFactory = Callable[[Settings], Any]


def runner_classes(names: Iterable[str] | None = None) -> dict[str, RunnerFactory]:
    """Runner names to their classes (only ``names`` when given: importing a runner can cost
    seconds, e.g. a platform SDK); one that fails to import is skipped with a warning."""
    wanted = None if names is None else set(names)
    found: dict[str, RunnerFactory] = {}
    for entry in entry_points(group=GROUP):
        if wanted is not None and entry.name not in wanted:
            continue
        try:
            found[entry.name] = entry.load()
        except Exception as exc:  # e.g. modal's SDK not installed in this process
            log.warning("runner not loadable", runner=entry.name, error=repr(exc))
    return found


def load_runners(
    settings: Settings, classes: Mapping[str, RunnerFactory] | None = None
) -> dict[str, Runner]:
    """Runner name -> runner, for each runner the GPU registry names (built once each)."""
    names = list(dict.fromkeys(gpu.runner for gpu in settings.gpus.values()))
    classes = runner_classes(names) if classes is None else classes
    built: dict[str, Runner] = {}
    for name in names:
        factory = classes.get(name)
        if factory is None:
            log.warning("no runner of this name is installed", runner=name)
            continue
        runner = factory(settings)
        if not isinstance(runner, Runner):
            raise TypeError(f"{factory!r} does not implement core.runner.Runner")
        built[name] = runner
    return built


def runners_by_gpu(settings: Settings, runners: Mapping[str, Runner]) -> dict[str, Runner]:
    """GPU name -> the runner the registry names for it, where that runner serves it here."""
    served = {
        gpu: runners[config.runner]
        for gpu, config in settings.gpus.items()
        if config.runner in runners and gpu in runners[config.runner].gpus()
    }
    log.info("runners ready", gpus={gpu: runner.name for gpu, runner in served.items()})
    return served


def build_runners(
    settings: Settings, classes: Mapping[str, RunnerFactory] | None = None
) -> dict[str, Runner]:
    """GPU name -> runner, ready for ``core.jobs.Pipeline``."""
    return runners_by_gpu(settings, load_runners(settings, classes))
