"""The adapter is on when its two secrets are set; otherwise it says in one line what turns it on."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
import structlog

from kernelcup.adapters.github.adapter import GitHubAdapter
from kernelcup.adapters.github.settings import GitHubConfigError, GitHubSettings, configured
from kernelcup.core.config import load_settings


def test_it_is_configured_by_either_secret_and_off_without_both() -> None:
    assert not configured({})
    assert configured({"GITHUB_WEBHOOK_SECRET": "s"}) and configured({"GITHUB_BOT_TOKEN": "t"})


async def test_one_secret_missing_is_one_line_that_says_what_turns_it_on() -> None:
    adapter = GitHubAdapter(load_settings(env={}), {"GITHUB_BOT_TOKEN": "t"})
    with structlog.testing.capture_logs() as said:
        await asyncio.wait_for(adapter.run(None), 5)  # type: ignore[arg-type]  # returns before using the core
    [line] = said
    assert line["log_level"] == "warning"
    assert "GITHUB_WEBHOOK_SECRET is not set" in line["event"] and "turns it on" in line["event"]


def test_a_secret_in_the_config_file_is_refused() -> None:
    base = load_settings(env={})
    settings = replace(base, sections={**base.sections, "github": {"webhook_secret": "in-a-file"}})
    with pytest.raises(GitHubConfigError, match="environment only"):
        GitHubSettings.load(settings, {"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_BOT_TOKEN": "t"})


def test_settings_come_from_the_section_and_the_environment() -> None:
    base = load_settings(env={"KERNELCUP_GITHUB__FOLDER": "kernels/", "KERNELCUP_GITHUB__GPUS": "H100 H200"})
    github = GitHubSettings.load(base, {"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_BOT_TOKEN": "t"})
    assert (github.folder, github.gpus, github.fork_approval) == ("kernels", ("H100", "H200"), True)


def test_serve_finds_the_adapter_through_its_entry_point() -> None:
    from kernelcup.core.plugins import load_adapters

    factory = load_adapters()["github"]
    assert factory.configured({"GITHUB_WEBHOOK_SECRET": "s", "GITHUB_BOT_TOKEN": "t"})
    assert not factory.configured({"GITHUB_TOKEN": "the runner's, not ours"})
