"""The command registry: every adapter builds its menus from it, so a command added here
appears on every platform. Handlers are plain functions of (context, request) -> Reply."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from core.errors import UserError
from core.messages import Reply, Request
from core.models import Role

if TYPE_CHECKING:
    from core.app import Kernelcup


class Kind(StrEnum):
    TEXT = "text"
    INT = "int"
    FLAG = "flag"
    CHOICE = "choice"
    FILE = "file"  # one attachment (the console reads it from a path)
    FOLDER = "folder"  # a leaderboard folder: a zip or files attached, or a path on the console
    LEADERBOARD = "leaderboard"  # text, with autocomplete from the database where a platform can
    GPU = "gpu"
    USER = "user"
    WHEN = "when"  # an instant with a zone (2026-12-31T23:59Z) or relative (+3d, +12h)


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


Handler = Callable[["Kernelcup", Request], Reply]


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


def commands() -> list[Command]:
    from core.commands import admin, leaderboard, submit, tokens  # noqa: F401  (registers them)

    return sorted(REGISTRY.values(), key=lambda c: (c.group, c.name))


def find_command(name: str) -> Command:
    commands()
    found = REGISTRY.get(name)
    if found is None:
        import difflib

        close = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f"Did you mean {close[0]}? " if close else ""
        raise UserError(f"There is no command {name!r}.", hint + "Type `help` for the list.")
    return found


GROUPS = ("leaderboard", "admin")


def parse_line(line: str) -> tuple[str, dict[str, Any]]:
    """Parse a chat line such as ``/leaderboard submit ranked kernel.py --gpu H100``.

    Positional values fill the command's positional parameters in order; ``--name value`` sets
    any parameter; ``--flag`` sets a flag; a parameter marked ``many`` may repeat.
    """
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UserError(f"Cannot read that command: {exc}.", "Check the quotes.") from exc
    if words and words[0].lstrip("/") in GROUPS:
        words = words[1:]
    if not words:
        return "help", {}
    cmd = find_command(words[0])
    args: dict[str, Any] = {}
    positional = [p for p in cmd.params if p.positional]
    rest = words[1:]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("--") and len(word) > 2:
            name = word[2:].replace("-", "_")
            value: str | None = None
            if "=" in name:
                name, value = name.split("=", 1)
            param = _param(cmd, name)
            if param.kind is Kind.FLAG:
                args[name] = True
            else:
                if value is None:
                    i += 1
                    if i >= len(rest):
                        raise UserError(f"--{param.name} needs a value.", param.help)
                    value = rest[i]
                _put(args, param, value)
        else:
            if not positional:
                raise UserError(f"Unexpected {word!r} for {cmd.name}.", usage(cmd))
            param = positional[0] if positional[0].many else positional.pop(0)
            _put(args, param, word)
        i += 1
    return cmd.name, args


def _param(cmd: Command, name: str) -> Param:
    for param in cmd.params:
        if param.name == name:
            return param
    raise UserError(f"{cmd.name} has no option --{name}.", usage(cmd))


def _put(args: dict[str, Any], param: Param, value: str) -> None:
    if param.many:
        args.setdefault(param.name, []).extend(v for v in value.split(",") if v)
    else:
        args[param.name] = value


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
            value = str(value).lower()
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
