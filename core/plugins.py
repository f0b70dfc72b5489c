"""Adapters and runners are found through entry points, the built-in ones too, so a third
party can ship one as a package without touching this repository.

A part whose package is not installed (``pip install kernelcup`` has no chat SDK, no Modal, no
web server) is off, with one log line naming the ``pip install`` that turns it on; nothing of a
part is imported before it is configured: an adapter's entry point can be a
:class:`DeferredAdapter` that imports the adapter module only when it is built.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from kernelcup.core.config import Settings, runner_chosen
from kernelcup.core.pipeline.runner import Runner

if TYPE_CHECKING:
    from kernelcup.core.app import Kernelcup

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


@dataclass(frozen=True)
class DeferredAdapter:
    """An adapter's entry point that says whether the adapter is configured without importing it,
    and imports it (with its platform SDK) only to build it."""

    target: str  # "module:attribute", an AdapterFactory
    is_configured: Callable[[Mapping[str, str]], bool]

    def configured(self, env: Mapping[str, str]) -> bool:
        return self.is_configured(env)

    def __call__(self, settings: Settings, env: Mapping[str, str]) -> Adapter:
        module, _, attribute = self.target.partition(":")
        factory: AdapterFactory = getattr(importlib.import_module(module), attribute)
        return factory(settings, env)


def install_hint(entry: EntryPoint, missing: ModuleNotFoundError) -> str:
    """The command that installs what a part needs: its distribution's extra of the same name
    (``kernelcup[modal]``) where there is one, else the missing package itself."""
    dist = entry.dist
    if dist is not None and entry.name in (dist.metadata.get_all("Provides-Extra") or []):
        return f"pip install '{dist.name}[{entry.name}]'"
    return f"pip install {(missing.name or 'the missing package').split('.')[0]}"


def log_part_off(kind: str, entry: EntryPoint, missing: ModuleNotFoundError, *, chosen: bool = True) -> None:
    """The one line that says a configured part is off for want of a package: a warning where the
    operator chose the part, else an info line (the shipped defaults' Modal GPUs ask for nothing)."""
    (log.warning if chosen else log.info)(f"{kind} {entry.name} is off: {install_hint(entry, missing)} turns it on",
                                          missing=missing.name)


def runner_classes(wanted: list[str] | None = None, *, chosen: bool = True) -> dict[str, RunnerFactory]:
    """Runner names to their classes; one that fails to import (its SDK missing) is skipped."""
    found: dict[str, RunnerFactory] = _loaded(RUNNERS, "runner", wanted, chosen=chosen)
    return found


def load_runners(settings: Settings, classes: Mapping[str, RunnerFactory] | None = None) -> dict[str, Runner]:
    """Runner name -> runner, for each runner the GPU registry names (built once each)."""
    return dict(each_runner(settings, classes))


def each_runner(settings: Settings, classes: Mapping[str, RunnerFactory] | None = None,
                ) -> Iterator[tuple[str, Runner]]:
    """The runners the GPU registry names, each built (and its module imported) only when the
    one before it has been taken, in the registry's order: the terminal's ``submit`` starts the
    local runner's harness before another runner's SDK is imported."""
    names = list(dict.fromkeys(gpu.runner for gpu in settings.gpus.values()))
    installed = entry_points(group=RUNNERS).names
    for name in names:
        factory = (runner_classes([name], chosen=runner_chosen(settings, name)) if classes is None
                   else classes).get(name)
        if factory is None:
            if name not in installed:  # else runner_classes said why
                log.warning("no runner of this name is installed", runner=name)
            continue
        runner = factory(settings)
        if not isinstance(runner, Runner):
            raise TypeError(f"{factory!r} does not implement kernelcup.core.pipeline.runner.Runner")
        yield name, runner


def load_adapters() -> dict[str, AdapterFactory]:
    """Adapter names to their factories; one that fails to import is skipped (and logged)."""
    found: dict[str, AdapterFactory] = _loaded(ADAPTERS, "adapter")
    return found


def _loaded(group: str, part: str, wanted: Collection[str] | None = None, *, chosen: bool = True) -> dict[str, Any]:
    """Each entry point of ``group`` (or only the ``wanted`` names), loaded; one whose package is
    missing is logged as a part that is off, any other failure as not loadable, and skipped."""
    found: dict[str, Any] = {}
    for entry in entry_points(group=group):
        if wanted is not None and entry.name not in wanted:
            continue
        try:
            found[entry.name] = entry.load()
        except ModuleNotFoundError as exc:
            log_part_off(part, entry, exc, chosen=chosen)
        except Exception as exc:
            log.warning(f"{part} not loadable", **{part: entry.name}, error=repr(exc))
    return found


def build_adapters(settings: Settings, env: Mapping[str, str], wanted: Callable[[str, AdapterFactory], bool],
                   ) -> list[Adapter]:
    """The adapters ``wanted`` picks, built; one whose package is missing is off (one log line)."""
    entries = {entry.name: entry for entry in entry_points(group=ADAPTERS)}
    built: list[Adapter] = []
    for name, factory in load_adapters().items():
        if not wanted(name, factory):
            continue
        try:
            built.append(factory(settings, env))
        except ModuleNotFoundError as exc:
            log_part_off("adapter", entries[name], exc)
    return built
