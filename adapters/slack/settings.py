"""The Slack adapter's settings: the ``slack:`` section of the config file, tokens from the
environment only (a token in a config file ends up in a repository sooner or later)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelcup.core.config import Settings
from kernelcup.core.plugins import DeferredAdapter

BOT_TOKEN = "SLACK_BOT_TOKEN"  # xoxb-...: every Web API call
APP_TOKEN = "SLACK_APP_TOKEN"  # xapp-...: Socket Mode's connection
SIGNING_SECRET = "SLACK_SIGNING_SECRET"  # HTTP mode: verifies that a request comes from Slack
MODES = ("auto", "socket", "http")


def configured(env: Mapping[str, str]) -> bool:
    """``kernelcup serve`` runs the adapter when the bot token is set with either way in."""
    return bool(env.get(BOT_TOKEN)) and bool(env.get(APP_TOKEN) or env.get(SIGNING_SECRET))


# The ``kernelcup.adapters`` entry point: slack_bolt and aiohttp are imported only when it is built.
ADAPTER = DeferredAdapter("kernelcup.adapters.slack.adapter:SlackAdapter", configured)


class SlackConfigError(Exception):
    """The Slack settings cannot work together; the message says what to set."""


@dataclass(frozen=True)
class SlackSettings:
    bot_token: str
    app_token: str
    signing_secret: str
    mode: str  # "socket" or "http", already resolved from "auto"
    command: str = "/leaderboard"
    host: str = "0.0.0.0"
    port: int = 3000
    path: str = "/slack/events"
    update_interval_s: float = 1.0
    usergroup_cache_s: float = 300.0
    api_url: str = "https://slack.com/api/"

    @classmethod
    def load(cls, settings: Settings, env: Mapping[str, str]) -> SlackSettings:
        section: dict[str, Any] = dict(settings.sections.get("slack") or {})
        bot_token, app_token = env.get(BOT_TOKEN, ""), env.get(APP_TOKEN, "")
        signing_secret = env.get(SIGNING_SECRET, "")
        mode = str(section.get("mode", "auto")).lower()
        if mode not in MODES:
            raise SlackConfigError(f"slack.mode must be one of {', '.join(MODES)}, not {mode!r}.")
        if mode == "auto":
            mode = "socket" if app_token else "http"
        if not bot_token:
            raise SlackConfigError(f"Set {BOT_TOKEN} (the app's Bot User OAuth Token, xoxb-...).")
        if mode == "socket" and not app_token:
            raise SlackConfigError(f"Socket Mode needs {APP_TOKEN} (an app-level token with connections:write).")
        if mode == "http" and not signing_secret:
            raise SlackConfigError(f"HTTP mode needs {SIGNING_SECRET}, or every request would be refused.")
        command = str(section.get("command", cls.command))
        return cls(
            bot_token=bot_token,
            app_token=app_token,
            signing_secret=signing_secret,
            mode=mode,
            command=command if command.startswith("/") else "/" + command,
            host=str(section.get("host", cls.host)),
            port=int(section.get("port", cls.port)),
            path=str(section.get("path", cls.path)),
            update_interval_s=float(section.get("update_interval_s", cls.update_interval_s)),
            usergroup_cache_s=float(section.get("usergroup_cache_s", cls.usergroup_cache_s)),
            api_url=str(section.get("api_url", cls.api_url)),
        )
