"""The command registry: what a command is, and the ``@command`` decorator that records one.
Every adapter builds its menus from the full list (``kernelcup.core.commands.catalog``), so a command
added to the core appears on every platform. Handlers are plain functions of
(context, request) -> Reply; the context is the part of the core a command may use."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from kernelcup.core.errors import UserError
from kernelcup.core.messages import Reply, Request
from kernelcup.core.roles import Role

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from kernelcup.core.config import Settings
    from kernelcup.core.leaderboards.catalog import SyncReport
    from kernelcup.core.leaderboards.sources import Source


class Kind(StrEnum):
    TEXT = "text"
    INT = "int"
    FLAG = "flag"
    CHOICE = "choice"
    FILE = "file"  # one attachment (the console reads it from a path)
    FOLDER = "folder"  # a leaderboard folder: a zip or files attached, or a path on the bot's own terminal
    LEADERBOARD = "leaderboard"  # text, with autocomplete from the database where a platform can
    GPU = "gpu"
    USER = "user"
    WHEN = "when"  # an instant with a zone (2026-12-31T23:59Z) or relative (+3d, +12h)
    SOURCE = "source"  # a git URL, or a folder on the bot's own terminal (made absolute there)


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    help: str
    required: bool = False
    positional: bool = False
    many: bool = False
    choices: tuple[str, ...] = ()
    default: Any = None
    # Other names a command line takes for it (``--from`` for ``source``): a Python keyword
    # cannot name a parameter, and Discord and the CLI build signatures from ``name``.
    aliases: tuple[str, ...] = ()
    # Other words a choice takes, each read as its choice: ("leaderboard", "ranked") is GPU MODE's.
    choice_aliases: tuple[tuple[str, str], ...] = ()

    def choice_words(self) -> tuple[str, ...]:
        """Every word the choice accepts: its choices, then their aliases."""
        return (*self.choices, *(alias for alias, _ in self.choice_aliases))


class CommandContext(Protocol):
    """What a command handler may use of the core (``kernelcup.core.app.Kernelcup`` is one). Handlers run
    in a worker thread, so each of these is safe to call from one."""

    @property
    def engine(self) -> Engine: ...

    @property
    def settings(self) -> Settings: ...

    def now(self) -> datetime: ...

    def served_gpus(self) -> set[str]:
        """GPUs that some configured runner can take now."""
        ...

    def sync_leaderboards(self, session: Session, source: Source | None = None) -> SyncReport:
        """``leaderboards_dir``, or ``source`` (a problems repository: ``admin sync --from``)."""
        ...

    def reschedule(self, board_id: int | None = None) -> None:
        """A leaderboard changed (or all, ``None``): its deadline jobs follow the row."""
        ...

    def cancel_jobs(self, job_ids: list[int]) -> None: ...


Handler = Callable[[CommandContext, Request], Reply]


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    params: tuple[Param, ...]
    role: Role
    group: str  # "leaderboard" or "admin": the slash-command group on chat platforms
    handler: Handler

    def param(self, name: str) -> Param:
        return next(p for p in self.params if p.name == name)


REGISTRY: dict[str, Command] = {}


def command(
    name: str, help: str, *params: Param, role: Role = Role.USER, group: str = "leaderboard"
) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        if name in REGISTRY:
            raise ValueError(f"command {name} registered twice")
        REGISTRY[name] = Command(name, help, params, role, group, handler)
        return handler

    return register


def registered() -> list[Command]:
    """The commands registered so far, by group and name: all of them once
    ``kernelcup.core.commands.catalog`` is imported, which every way to run a command goes through."""
    return sorted(REGISTRY.values(), key=lambda c: (c.group, c.name))


GROUPS = ("leaderboard", "admin")  # the slash-command groups on chat platforms


def coerce_args(cmd: Command, raw: dict[str, Any]) -> dict[str, Any]:
    """Check and convert arguments the same way for every platform."""
    out: dict[str, Any] = {}
    for param in cmd.params:
        value = raw.get(param.name)
        if value is None or value == [] or value == "":
            if param.required and param.kind not in (Kind.FILE, Kind.FOLDER):
                raise UserError(f"{cmd.name} needs {param.name}.", usage(cmd))
            out[param.name] = param.default
            continue
        if param.kind is Kind.INT:
            try:
                value = int(value)
            except (TypeError, ValueError) as exc:
                raise UserError(f"{param.name} must be a whole number, not {value!r}.") from exc
        elif param.kind is Kind.FLAG:
            value = value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "y")
        elif param.kind is Kind.CHOICE:
            value = dict(param.choice_aliases).get(str(value).lower(), str(value).lower())
            if value not in param.choices:
                raise UserError(
                    f"{param.name} must be one of {', '.join(param.choices)}, not {value!r}.",
                    usage(cmd),
                )
        elif param.many and isinstance(value, str):
            value = [v for v in value.replace(",", " ").split() if v]
        out[param.name] = value
    unknown = set(raw) - {p.name for p in cmd.params}
    if unknown:
        raise UserError(f"{cmd.name} has no option {', '.join(sorted(unknown))}.", usage(cmd))
    return out


def usage(cmd: Command) -> str:
    parts = [cmd.name]
    for p in cmd.params:
        label = p.name if not p.choices else "|".join(p.choices)
        if p.positional:
            parts.append(f"<{label}>" if p.required else f"[{label}]")
        elif p.kind is Kind.FLAG:
            parts.append(f"[--{p.name}]")
        else:
            parts.append(f"[--{p.name} {p.kind.value.upper()}]")
    return "Usage: " + " ".join(parts)
