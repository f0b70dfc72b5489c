"""Where a submission's message lives, written as the ``reply_to`` the core keeps for it.

``slack:<team>/<channel>`` when the request arrives, then ``slack:<team>/<channel>/<ts>`` once
the message is posted (``channel`` is where it landed: the user's DM when the bot was not in the
channel). A later process edits that message with ``chat.update``; its thread (``thread_ts`` =
the message's ``ts``) takes the report's files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "slack:"
_FORM = re.compile(r"slack:(?P<team>[^/]*)/(?P<channel>[^/]+)(?:/(?P<ts>\d+\.\d+))?")


@dataclass(frozen=True)
class Origin:
    team: str
    channel: str
    ts: str | None = None  # None until the message is posted

    @property
    def reply_to(self) -> str:
        where = f"{PREFIX}{self.team}/{self.channel}"
        return where if self.ts is None else f"{where}/{self.ts}"

    def at(self, channel: str, ts: str) -> Origin:
        return Origin(self.team, channel, ts)

    @classmethod
    def parse(cls, reply_to: str) -> Origin | None:
        match = _FORM.fullmatch(reply_to)
        return None if match is None else cls(match["team"], match["channel"], match["ts"])
