"""Adapters and runners are found through entry points, the built-in ones too, so a third
party can ship one as a package without touching this repository."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from core.config import Settings
from core.runner import Runner

if TYPE_CHECKING:
    from core.app import Kernelcup

ADAPTERS = "kernelcup.adapters"
RUNNERS = "kernelcup.runners"


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


def load_runners(settings: Settings) -> dict[str, Runner]:
    """One runner object per runner name that the GPU registry uses."""
    wanted = {gpu.runner for gpu in settings.gpus.values()}
    found: dict[str, Any] = {ep.name: ep for ep in entry_points(group=RUNNERS)}
    missing = wanted - found.keys()
    if missing:
        raise RuntimeError(
            f"the GPU registry names runner(s) {', '.join(sorted(missing))}, which no installed "
            f"package provides (entry point group {RUNNERS})"
        )
    runners: dict[str, Runner] = {}
    for name in sorted(wanted):
        factory: RunnerFactory = found[name].load()
        runner = factory(settings)
        if not isinstance(runner, Runner):
            raise TypeError(f"runner {name} ({factory!r}) does not implement core.runner.Runner")
        runners[name] = runner
    return runners


def load_adapters() -> dict[str, AdapterFactory]:
    return {ep.name: ep.load() for ep in entry_points(group=ADAPTERS)}
