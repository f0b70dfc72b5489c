"""Adapters and runners are found through entry points, the built-in ones too, so a third
party can ship one as a package without touching this repository."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Protocol

import structlog

from core.config import Settings
from core.runner import Runner

if TYPE_CHECKING:
    from core.app import Kernelcup

ADAPTERS = "kernelcup.adapters"
RUNNERS = "kernelcup.runners"
log = structlog.get_logger("kernelcup.plugins")


class Adapter(Protocol):
    """A front end: turns platform events into Requests and renders Replies natively."""

    name: str

    async def run(self, app: Kernelcup) -> None:
        """Serve until stopped or until the platform connection ends for good."""
        ...

    async def stop(self) -> None: ...


class AdapterFactory(Protocol):
    def configured(self, env: Mapping[str, str]) -> bool:
        """True when the settings this adapter needs (tokens, ...) are present."""
        ...

    def __call__(self, settings: Settings, env: Mapping[str, str]) -> Adapter: ...


class RunnerFactory(Protocol):
    """A runner class, built once per process as ``cls(settings)``."""

    def __call__(self, settings: Settings) -> Runner: ...


def runner_classes(wanted: list[str] | None = None) -> dict[str, RunnerFactory]:
    """Runner names to their classes; one that fails to import (its SDK missing) is skipped."""
    found: dict[str, RunnerFactory] = {}
    for entry in entry_points(group=RUNNERS):
        if wanted is not None and entry.name not in wanted:
            continue
        try:
            found[entry.name] = entry.load()
        except Exception as exc:
            log.warning("runner not loadable", runner=entry.name, error=repr(exc))
    return found


def load_runners(settings: Settings, classes: Mapping[str, RunnerFactory] | None = None) -> dict[str, Runner]:
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


def load_adapters() -> dict[str, AdapterFactory]:
    return {ep.name: ep.load() for ep in entry_points(group=ADAPTERS)}
