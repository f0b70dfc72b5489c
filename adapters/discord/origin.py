"""Where a submission's public message lives, written as the ``reply_to`` the core keeps for it.

``discord:<guild id or dm>/<channel id>`` when the command arrives, then
``discord:<guild>/<channel>/<message id>`` once the message is posted. That is all another
process needs to edit the message with the bot token: an interaction's own token dies with the
process that held it (and after 15 minutes anyway), so it is never stored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

PREFIX = "discord:"
_FORM = re.compile(r"discord:(?P<guild>\d+|dm)/(?P<channel>\d+)(?:/(?P<message>\d+))?")


@dataclass(frozen=True)
class Origin:
    guild_id: int | None  # None: a direct message
    channel_id: int
    message_id: int | None = None  # None until the message is posted

    @property
    def reply_to(self) -> str:
        where = f"{PREFIX}{self.guild_id or 'dm'}/{self.channel_id}"
        return where if self.message_id is None else f"{where}/{self.message_id}"

    def at(self, message_id: int) -> Origin:
        return replace(self, message_id=message_id)

    @classmethod
    def parse(cls, reply_to: str) -> Origin | None:
        match = _FORM.fullmatch(reply_to)
        if match is None:
            return None
        guild, message = match["guild"], match["message"]
        return cls(None if guild == "dm" else int(guild), int(match["channel"]),
                   int(message) if message else None)


def user_id_of(identity: str) -> int | None:
    """The Discord user behind a core identity (``discord:1234``), if it is one."""
    user = identity.removeprefix(PREFIX)
    return int(user) if user != identity and user.isdigit() else None
