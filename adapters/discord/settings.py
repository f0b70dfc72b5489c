"""The ``discord:`` section of config/kernelcup.yml as a typed object, checked once at start.

The token is a secret and never lives in the file: it comes from ``DISCORD_TOKEN`` only.
Roles (``discord-role:<name or id>``, ``discord:<user id>``) and announcement channels stay in
the core's ``roles:`` and ``announcements: discord:`` sections, where every platform keeps its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelcup.core.config import Settings
from kernelcup.core.plugins import DeferredAdapter

TOKEN_ENV = "DISCORD_TOKEN"
SECTION = "discord"


def configured(env: Mapping[str, str]) -> bool:
    """``kernelcup serve`` runs the adapter when its token is set."""
    return bool(env.get(TOKEN_ENV, "").strip())


# The ``kernelcup.adapters`` entry point: discord.py is imported only when the adapter is built.
ADAPTER = DeferredAdapter("kernelcup.adapters.discord.adapter:DiscordAdapter", configured)


class DiscordConfigError(ValueError):
    """A value in the ``discord:`` section that cannot be used; the message names the key."""


@dataclass(frozen=True)
class DiscordSettings:
    # Servers to register the commands in (they appear at once); none: global commands.
    guild_ids: tuple[int, ...] = ()
    # Channels where /leaderboard submit is taken (and threads under them); none: anywhere.
    submission_channels: tuple[int, ...] = ()
    # Details of a submission go to a private thread with the submitter where the server allows.
    private_threads: bool = True
    # At most one live edit per message per this many seconds (Discord rate-limits edits).
    edit_interval_s: float = 1.0
    # Register the command tree when the bot starts (otherwise `python -m kernelcup.adapters.discord sync-commands`).
    sync_commands_on_start: bool = False
    # A command that answers within this time is answered at once; a slower one is deferred.
    respond_within_s: float = 2.0
    # Stop using an interaction token this long before Discord's 15 minutes run out.
    token_margin_s: float = 60.0
    # Characters per page of a reply (an embed holds 4096); longer replies get page buttons.
    page_chars: int = 3800

    @classmethod
    def from_settings(cls, settings: Settings) -> DiscordSettings:
        raw: Mapping[str, Any] = settings.sections.get(SECTION) or {}
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise DiscordConfigError(f"unknown key(s) in the discord section: {', '.join(sorted(unknown))}")
        defaults = cls()
        return cls(
            guild_ids=snowflakes(raw.get("guild_ids"), "guild_ids"),
            submission_channels=snowflakes(raw.get("submission_channels"), "submission_channels"),
            private_threads=_flag(raw.get("private_threads", defaults.private_threads)),
            edit_interval_s=float(raw.get("edit_interval_s", defaults.edit_interval_s)),
            sync_commands_on_start=_flag(raw.get("sync_commands_on_start", defaults.sync_commands_on_start)),
            respond_within_s=float(raw.get("respond_within_s", defaults.respond_within_s)),
            token_margin_s=float(raw.get("token_margin_s", defaults.token_margin_s)),
            page_chars=int(raw.get("page_chars", defaults.page_chars)),
        )


def snowflakes(value: object, key: str) -> tuple[int, ...]:
    """Ids from a YAML list, or from one string ("1 2", "1,2", "[1, 2]") as an env override gives."""
    if value is None or value == "":
        return ()
    items: list[object]
    if isinstance(value, str):
        items = [part for part in re.split(r"[\s,\[\]]+", value) if part]
    elif isinstance(value, int):
        items = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        raise DiscordConfigError(f"discord.{key} must be a list of ids, not {value!r}")
    out: list[int] = []
    for item in items:
        try:
            out.append(int(str(item)))
        except ValueError:
            raise DiscordConfigError(f"discord.{key}: {item!r} is not a Discord id (a number)") from None
    return tuple(out)


def _flag(value: object) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")
