"""Slack text as core commands: the slash command's text, and the message that comes with a
shared file (a command line, ``#!POPCORN`` lines, or nothing at all)."""

from __future__ import annotations

import html
import re
import shlex
from typing import Any

from kernelcup.core.commands.catalog import commands
from kernelcup.core.commands.parsing import parse_line
from kernelcup.core.commands.registry import GROUPS
from kernelcup.core.pipeline.submissions import read_directives

_MENTION = re.compile(r"<@([UW][A-Z0-9]+)(?:\|[^>]*)?>")
_POPCORN_MODE = re.compile(r"^\s*(?:#|//)!POPCORN\s+mode\s+(\w+)", re.MULTILINE | re.IGNORECASE)
_POPCORN_LINE = re.compile(r"^\s*(?:#|//)!POPCORN\b", re.IGNORECASE)
DEFAULT_FILE_MODE = "test"  # a file shared without a mode is checked, never ranked by surprise


_TYPOGRAPHY = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'", "`": None})
_DASH_OPTION = re.compile(r"(?<!\S)[\u2013\u2014](?=\w)")  # "—gpu": an OS turned "--" into a dash


def plain(text: str, team: str) -> str:
    """Slack's escaping (and a phone's typography) undone; user mentions become identities
    (``<@U2|bob>`` -> slack:T1/U2)."""
    text = _MENTION.sub(lambda m: f"slack:{team}/{m.group(1)}", text)
    return _DASH_OPTION.sub("--", html.unescape(text).translate(_TYPOGRAPHY)).strip()


def slash_command(text: str, team: str) -> tuple[str, dict[str, Any]]:
    """``/leaderboard <text>``; raises kernelcup.core.errors.UserError, e.g. for an unknown subcommand."""
    name, args = parse_line(plain(text, team))
    return name, (submit_args(args) if name == "submit" else args)


def submit_args(args: dict[str, Any]) -> dict[str, Any]:
    """In Slack the file is never named on the command line, so ``submit ranked vectoradd``
    means the leaderboard vectoradd (the core's second positional is the file)."""
    value = args.pop("file", None)
    if value and "." not in str(value) and not args.get("leaderboard"):
        args["leaderboard"] = str(value)
    return args


def mentions(text: str, user: str) -> bool:
    return any(m.group(1) == user for m in _MENTION.finditer(text))


def file_comment(text: str, team: str, bot_user: str | None) -> tuple[str, dict[str, Any]]:
    """The command for a shared file. Without a command line it is ``submit``, with the mode,
    leaderboard and GPUs from ``#!POPCORN`` lines where given (the file's own lines count too,
    read later by the core)."""
    if bot_user:
        text = text.replace(f"<@{bot_user}>", " ")
    text = plain(text, team)
    line = _command_line(text)
    name, args = parse_line(line) if line else ("submit", {})
    if name != "submit":
        return name, args
    args = submit_args(args)
    directives = read_directives(text)
    mode = _POPCORN_MODE.search(text)
    args.setdefault("mode", mode.group(1).lower() if mode else DEFAULT_FILE_MODE)
    if not args.get("leaderboard") and directives.leaderboard:
        args["leaderboard"] = directives.leaderboard
    if not args.get("gpu") and directives.gpus:
        args["gpu"] = list(directives.gpus)
    return name, args


def wants_bot(text: str, team: str, bot_user: str | None) -> bool:
    """In a channel, a shared file is for the bot only when its message says so."""
    if bot_user and mentions(text, bot_user):
        return True
    cleaned = plain(text, team)
    return _command_line(cleaned) is not None or any(_POPCORN_LINE.match(line) for line in cleaned.splitlines())


def _command_line(text: str) -> str | None:
    names = {c.name for c in commands()}
    for line in text.splitlines():
        if _POPCORN_LINE.match(line):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = line.split()
        if words and words[0].lstrip("/") in GROUPS:
            words = words[1:]
        if words and words[0] in names:
            return line
    return None
