"""Reading a typed command line, as people type it in a chat or the console, into a command's
name and arguments."""

from __future__ import annotations

import shlex
from typing import Any

from kernelcup.core.commands.catalog import find_command
from kernelcup.core.commands.registry import GROUPS, Command, Kind, Param, usage
from kernelcup.core.errors import UserError


def parse_line(line: str) -> tuple[str, dict[str, Any]]:
    """Parse a chat line such as ``/leaderboard submit ranked kernel.py --gpu H100``.

    Positional values fill the command's positional parameters in order, skipping those named
    with ``--name value`` (``submit --mode test kernel.py``); ``--flag`` sets a flag; a parameter
    marked ``many`` may repeat.
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
    loose: list[str] = []
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
                args[param.name] = True
            else:
                if value is None:
                    i += 1
                    if i >= len(rest):
                        raise UserError(f"--{param.name} needs a value.", param.help)
                    value = rest[i]
                _put(args, param, value)
        else:
            loose.append(word)
        i += 1
    fill_positionals(cmd, args, loose)
    return cmd.name, args


def fill_positionals(cmd: Command, args: dict[str, Any], words: list[str]) -> None:
    """Give ``words`` to the positional parameters that no option named, in order."""
    open_params = [p for p in cmd.params if p.positional and args.get(p.name) in (None, [])]
    for word in words:
        if not open_params:
            raise UserError(f"Unexpected {word!r} for {cmd.name}.", usage(cmd))
        param = open_params[0] if open_params[0].many else open_params.pop(0)
        _put(args, param, word)


def _param(cmd: Command, name: str) -> Param:
    for param in cmd.params:
        if name == param.name or name in param.aliases:
            return param
    raise UserError(f"{cmd.name} has no option --{name}.", usage(cmd))


def _put(args: dict[str, Any], param: Param, value: str) -> None:
    if param.many:
        if args.get(param.name) is None:  # the CLI fills every parameter, unset ones with None
            args[param.name] = []
        args[param.name].extend(v for v in value.split(",") if v)
    else:
        args[param.name] = value
