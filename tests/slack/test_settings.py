"""Which Slack settings start the adapter, and the clear refusals when they cannot work."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kernelcup.adapters.slack.adapter import SlackAdapter
from kernelcup.adapters.slack.settings import SlackConfigError, SlackSettings
from kernelcup.core.config import load_settings


def settings(**slack: object):
    base = load_settings(env={})
    return replace(base, sections={**base.sections, "slack": {**base.sections.get("slack", {}), **slack}})


def test_the_config_file_documents_the_slack_section() -> None:
    loaded = SlackSettings.load(load_settings(env={}), {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s"})
    assert (loaded.mode, loaded.command, loaded.port, loaded.path) == ("http", "/leaderboard", 3000, "/slack/events")


def test_an_environment_variable_overrides_the_slack_section() -> None:
    env = {"KERNELCUP_SLACK__PORT": "8080", "KERNELCUP_SLACK__MODE": "http"}
    loaded = SlackSettings.load(load_settings(env=env), {"SLACK_BOT_TOKEN": "x", "SLACK_APP_TOKEN": "a",
                                                         "SLACK_SIGNING_SECRET": "s"})
    assert (loaded.mode, loaded.port) == ("http", 8080)


def test_the_adapter_is_configured_by_a_bot_token_and_a_way_in() -> None:
    assert SlackAdapter.configured({"SLACK_BOT_TOKEN": "x", "SLACK_APP_TOKEN": "a"})
    assert SlackAdapter.configured({"SLACK_BOT_TOKEN": "x", "SLACK_SIGNING_SECRET": "s"})
    assert not SlackAdapter.configured({"SLACK_BOT_TOKEN": "x"})
    assert not SlackAdapter.configured({"SLACK_APP_TOKEN": "a", "SLACK_SIGNING_SECRET": "s"})


def test_http_mode_without_a_signing_secret_is_refused_with_what_to_set() -> None:
    with pytest.raises(SlackConfigError, match="SLACK_SIGNING_SECRET"):
        SlackSettings.load(settings(mode="http"), {"SLACK_BOT_TOKEN": "x", "SLACK_APP_TOKEN": "a"})


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(SlackConfigError, match=r"slack\.mode"):
        SlackSettings.load(settings(mode="carrier-pigeon"), {"SLACK_BOT_TOKEN": "x", "SLACK_APP_TOKEN": "a"})
