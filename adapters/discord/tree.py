"""Slash commands built from the core's command registry: ``/leaderboard ...`` and ``/admin ...``.

A command added to the core appears here with no change. Each core parameter becomes an option
typed from its kind: a file is an attachment, a leaderboard or GPU a string with autocomplete
from the database, a choice a fixed list, an int an integer, a flag a boolean, and a parameter
that takes several values one string of values separated by spaces or commas.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import discord
from discord import AppCommandOptionType, app_commands
from discord.app_commands import Choice

from kernelcup.core.commands.catalog import commands
from kernelcup.core.commands.registry import GROUPS, Command, Kind, Param

# Parameters asked in a modal rather than as options (typed text is easier to get right in a form).
MODAL_PARAMS: dict[str, tuple[str, ...]] = {"create": ("name", "deadline", "gpu")}
CONFIRM_PARAM = "yes"  # a flag that confirms a destructive command: a button asks instead
EXTRA_FOLDER_FILES = 4  # a folder may come as a zip or as up to five loose files
DESCRIPTION_CHARS = 100  # Discord's limit for command and option descriptions
GROUP_HELP = {
    "leaderboard": "GPU kernel leaderboards: submit, rankings, tasks",
    "admin": "kernelcup administration (admins only)",
}

OnCommand = Callable[[discord.Interaction, Command, dict[str, Any]], Awaitable[None]]
Complete = Callable[[Kind, str, dict[str, Any]], Awaitable[list[str]]]

_OPTION_TYPE = {
    Kind.INT: AppCommandOptionType.integer,
    Kind.FLAG: AppCommandOptionType.boolean,
    Kind.FILE: AppCommandOptionType.attachment,
    Kind.FOLDER: AppCommandOptionType.attachment,
}


class ParamOption(app_commands.Transformer):
    """One core parameter as a Discord option; values pass through unchanged."""

    def __init__(self, param: Param) -> None:
        self.param = param

    @property
    def type(self) -> AppCommandOptionType:
        if self.param.many:
            return AppCommandOptionType.string
        return _OPTION_TYPE.get(self.param.kind, AppCommandOptionType.string)

    @property
    def choices(self) -> list[Choice[int | float | str]] | None:
        if not self.param.choices:
            return None
        return [Choice(name=choice, value=choice) for choice in self.param.choices]

    async def transform(self, interaction: discord.Interaction, value: Any, /) -> Any:
        return value


class CompletedOption(ParamOption):
    """An option whose values come from the database as the user types (leaderboards, GPUs)."""

    def __init__(self, param: Param, complete: Complete) -> None:
        super().__init__(param)
        self._complete = complete

    async def autocomplete(self, interaction: discord.Interaction, value: int | float | str, /
                           ) -> list[Choice[int | float | str]]:
        typed = str(value)
        # Several values: complete the last one, keep those before it.
        parts = re.split(r"[\s,]+", typed) if self.param.many else [typed]
        head, last = " ".join(p for p in parts[:-1] if p), parts[-1]
        args = {name: option for name, option in vars(interaction.namespace).items() if isinstance(option, str)}
        found = await self._complete(self.param.kind, last, args)
        values = [f"{head} {name}".strip() for name in found]
        return [Choice(name=value[:100], value=value[:100]) for value in values]


def options_of(cmd: Command) -> list[tuple[str, Param]]:
    """(option name, core parameter) for each slash option of ``cmd``."""
    asked_in_modal = MODAL_PARAMS.get(cmd.name, ())
    out: list[tuple[str, Param]] = []
    for param in cmd.params:
        if param.name in asked_in_modal or (param.name == CONFIRM_PARAM and param.kind is Kind.FLAG):
            continue
        out.append((param.name, param))
        if param.kind is Kind.FOLDER:
            extra = Param(param.name, Kind.FILE, "another file of the folder")
            out.extend((f"{param.name}_{i}", extra) for i in range(2, 2 + EXTRA_FOLDER_FILES))
    return out


def modal_params(cmd: Command) -> list[Param]:
    return [p for p in cmd.params if p.name in MODAL_PARAMS.get(cmd.name, ())]


def build_groups(on_command: OnCommand, complete: Complete) -> list[app_commands.Group]:
    groups = {name: app_commands.Group(name=name, description=GROUP_HELP.get(name, name), guild_only=True)
              for name in GROUPS}
    for cmd in commands():
        group = groups.get(cmd.group)
        if group is None:
            continue
        group.add_command(app_commands.Command(
            name=cmd.name,
            description=_short(cmd.help),
            callback=_callback(cmd, on_command, complete),
            parent=group,
        ))
    return [group for group in groups.values() if group.commands]


def _callback(cmd: Command, on_command: OnCommand, complete: Complete) -> Callable[..., Coroutine[Any, Any, None]]:
    """A callback whose signature declares the options, the way discord.py reads them."""

    async def callback(interaction: discord.Interaction, **values: Any) -> None:
        await on_command(interaction, cmd, values)

    parameters = [inspect.Parameter("interaction", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    annotation=discord.Interaction)]
    descriptions: dict[str, str] = {}
    for name, param in options_of(cmd):
        option: ParamOption = (CompletedOption(param, complete) if param.kind in (Kind.LEADERBOARD, Kind.GPU)
                               else ParamOption(param))
        required = param.required and name == param.name and param.default is None
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=option,
                                            default=inspect.Parameter.empty if required else None))
        descriptions[name] = _short(param.help)
    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    callback.__discord_app_commands_param_description__ = descriptions  # type: ignore[attr-defined]
    return callback


def _short(text: str) -> str:
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 1] + "…"
