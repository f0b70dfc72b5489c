"""The one announcement path: the core publishes, every running adapter renders natively in
the channels config names for that leaderboard and platform."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import structlog

from kernelcup.core.config import Settings
from kernelcup.core.messages import Reply

log = structlog.get_logger("kernelcup.announcements")


class Occasion(StrEnum):
    OPENED = "opened"
    NEW_LEADER = "new_leader"
    REMINDER = "reminder"
    CLOSED = "closed"
    FINAL_STANDINGS = "final_standings"


@dataclass(frozen=True)
class Announcement:
    leaderboard: str
    occasion: Occasion
    reply: Reply


class Announcer(Protocol):
    """What an adapter implements to take announcements."""

    platform: str  # the key under `announcements:` in config, e.g. "discord", "slack", "console"

    async def announce(self, channel: str, reply: Reply) -> None: ...


class Announcements:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._announcers: dict[str, Announcer] = {}
        self.sent: list[tuple[str, str, Announcement]] = []  # (platform, channel, what): for status and tests

    def register(self, announcer: Announcer) -> None:
        self._announcers[announcer.platform] = announcer

    def unregister(self, announcer: Announcer) -> None:
        if self._announcers.get(announcer.platform) is announcer:
            del self._announcers[announcer.platform]

    def channel_for(self, platform: str, leaderboard: str) -> str | None:
        channels = self.settings.announcements.get(platform) or {}
        return channels.get(leaderboard) or channels.get("*")

    async def publish(self, announcement: Announcement) -> int:
        """Send to every platform with a channel for this leaderboard; one failing platform
        does not stop the others. Returns how many platforms took it."""
        delivered = 0
        for platform, announcer in list(self._announcers.items()):
            channel = self.channel_for(platform, announcement.leaderboard)
            if channel is None:
                continue
            try:
                await announcer.announce(channel, announcement.reply)
            except Exception:
                log.exception("announcement failed", platform=platform, channel=channel,
                              leaderboard=announcement.leaderboard, occasion=announcement.occasion.value)
                continue
            self.sent.append((platform, channel, announcement))
            delivered += 1
        return delivered
