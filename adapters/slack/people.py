"""Who is asking: Slack users as core actors.

The identity is ``slack:<team>/<user>`` (user ids are only unique within a workspace). Platform
roles are ``slack-group:<usergroup id>``, looked up only when the config's roles name such a
group, and cached: usergroups.list is rate limited and the answer rarely changes.
"""

from __future__ import annotations

import time

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from kernelcup.core.config import Settings
from kernelcup.core.messages import Actor

log = structlog.get_logger("kernelcup.slack")
GROUP_ROLE = "slack-group:"


def identity(team: str, user: str) -> str:
    return f"slack:{team}/{user}"


class People:
    def __init__(self, client: AsyncWebClient, settings: Settings, *, group_cache_s: float) -> None:
        self.client = client
        self.group_cache_s = group_cache_s
        self.uses_groups = any(
            entry.startswith(GROUP_ROLE) for entries in settings.roles.values() for entry in entries
        )
        self._names: dict[str, str] = {}
        self._groups: dict[str, set[str]] = {}  # usergroup id -> its members
        self._groups_at = float("-inf")

    async def actor(self, team: str, user: str, fallback_name: str | None = None) -> Actor:
        """Payloads name the user differently (a slash command's legacy user_name, a form's
        username); the profile's display name is used everywhere so a ranking shows one name."""
        display = await self.display_name(user, fallback_name)
        groups = await self.groups_of(user) if self.uses_groups else ()
        return Actor(identity(team, user), display, tuple(f"{GROUP_ROLE}{g}" for g in sorted(groups)))

    async def display_name(self, user: str, fallback: str | None = None) -> str:
        """users.info's display name (cached); the payload's name or the id when it fails."""
        if user not in self._names:
            try:
                response = await self.client.users_info(user=user)
            except SlackApiError as exc:
                log.info("users.info failed", user=user, error=exc.response.get("error"))
                return fallback or user
            info = response.get("user") or {}
            profile = info.get("profile") or {}
            self._names[user] = str(
                profile.get("display_name") or profile.get("real_name") or info.get("name") or user
            )
        return self._names[user]

    async def groups_of(self, user: str) -> list[str]:
        if time.monotonic() - self._groups_at > self.group_cache_s:
            try:
                response = await self.client.usergroups_list(include_users=True)
            except SlackApiError as exc:
                # Without usergroups:read nobody gets a group role; identities still work.
                log.warning("usergroups.list failed; slack-group roles unavailable", error=exc.response.get("error"))
                return []
            self._groups = {str(g["id"]): set(g.get("users") or []) for g in response.get("usergroups") or []}
            self._groups_at = time.monotonic()
        return [group for group, members in self._groups.items() if user in members]
