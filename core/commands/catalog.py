"""Every command of the core, found by name. Importing the command modules here registers them,
so this is the one place that knows which modules hold commands."""

from __future__ import annotations

import difflib

from kernelcup.core.commands import admin, export, leaderboard, private, submit, tokens, withdraw  # noqa: F401 (registers)
from kernelcup.core.commands.registry import REGISTRY, Command, registered
from kernelcup.core.errors import UserError


def commands() -> list[Command]:
    """Every command, by group and name."""
    return registered()


def find_command(name: str) -> Command:
    found = REGISTRY.get(name)
    if found is None:
        close = difflib.get_close_matches(name, list(REGISTRY), n=1)
        hint = f"Did you mean {close[0]}? " if close else ""
        raise UserError(f"There is no command {name!r}.", hint + "Type `help` for the list.")
    return found
