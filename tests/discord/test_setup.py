"""How the bot presents itself: commands built from the core's registry, registered on demand
in the configured servers, configuration, the entry point, and announcements."""

from __future__ import annotations

from typing import Any

import discord
import pytest
from discord import app_commands

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.adapters.discord.settings import DiscordConfigError, DiscordSettings
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import commands
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.messages import Reply, Table, Text
from kernelcup.core.plugins import DeferredAdapter, load_adapters
from kernelcup.core.scheduling.announcements import Announcement, Occasion
from tests.discord.fake_discord import GUILD_ID, SUBMIT_CHANNEL, FakeDiscord, embeds_of


def groups(adapter: DiscordAdapter) -> list[app_commands.Group]:
    found = adapter.tree.get_commands(guild=discord.Object(id=GUILD_ID))
    return [group for group in found if isinstance(group, app_commands.Group)]


def test_every_core_command_is_a_slash_command_of_its_group(adapter: DiscordAdapter) -> None:
    tree = {group.name: {sub.name for sub in group.commands} for group in groups(adapter)}
    for cmd in commands():
        assert cmd.name in tree[cmd.group]


def test_options_are_typed_from_the_parameter_kinds(adapter: DiscordAdapter) -> None:
    payload = next(g for g in groups(adapter) if g.name == "leaderboard").to_dict(adapter.tree)
    submit = next(o for o in payload["options"] if o["name"] == "submit")
    options = {o["name"]: o for o in submit["options"]}
    assert options["file"]["type"] == 11 and options["file"]["required"]  # an attachment
    assert [c["value"] for c in options["mode"]["choices"]] == ["test", "benchmark", "ranked", "profile"]
    assert options["leaderboard"]["autocomplete"] and options["gpu"]["autocomplete"]
    delete = next(o for o in payload["options"] if o["name"] == "delete")
    assert [o["name"] for o in delete["options"]] == ["leaderboard"]  # "yes" is a button, not an option


@pytest.fixture
def discord_section() -> dict[str, Any]:
    return {"guild_ids": [GUILD_ID], "submission_channels": [SUBMIT_CHANNEL]}


async def test_commands_are_registered_in_the_configured_guilds_only(adapter: DiscordAdapter,
                                                                     fake: FakeDiscord) -> None:
    assert not fake.synced  # never on start unless asked
    counts = await adapter.sync_commands()
    assert counts == {str(GUILD_ID): 2}
    assert sorted(c["name"] for c in fake.synced[str(GUILD_ID)]) == ["admin", "leaderboard"]
    assert "global" not in fake.synced


def test_the_adapter_runs_only_with_a_token() -> None:
    assert DiscordAdapter.configured({"DISCORD_TOKEN": "abc"})
    assert not DiscordAdapter.configured({"DISCORD_TOKEN": " "})
    assert not DiscordAdapter.configured({})
    entry = load_adapters()["discord"]
    assert entry.configured({"DISCORD_TOKEN": "abc"}) and not entry.configured({})
    assert isinstance(entry, DeferredAdapter) and entry.target == "kernelcup.adapters.discord.adapter:DiscordAdapter"


def test_ids_can_come_from_an_environment_variable() -> None:
    settings = load_settings(env={"KERNELCUP_DISCORD__GUILD_IDS": "[123, 456]",
                                  "KERNELCUP_DISCORD__SUBMISSION_CHANNELS": "789"})
    config = DiscordSettings.from_settings(settings)
    assert config.guild_ids == (123, 456) and config.submission_channels == (789,)


def test_a_mistyped_key_is_an_error_that_names_it(settings: Settings) -> None:
    from dataclasses import replace

    broken = replace(settings, sections={"discord": {"guild_id": [1]}})
    with pytest.raises(DiscordConfigError, match="guild_id"):
        DiscordSettings.from_settings(broken)


async def test_announcements_go_to_the_configured_channel(adapter: DiscordAdapter, fake: FakeDiscord,
                                                          app: Kernelcup) -> None:
    reply = Reply([Text("New #1 on identity", style="title"), Table(("rank", "user"), (("1", "alice"),))])
    delivered = await app.announcements.publish(Announcement("identity", Occasion.NEW_LEADER, reply))
    assert delivered == 1
    posted = [c for c in fake.find("POST", f"/channels/{SUBMIT_CHANNEL}/messages")
              if embeds_of(c) and embeds_of(c)[0].get("title") == "New #1 on identity"]
    assert posted and "alice" in embeds_of(posted[0])[0]["description"]


async def test_sync_commands_from_the_command_line_registers_the_tree(fake: FakeDiscord,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcup.adapters.discord.__main__ import sync_commands

    monkeypatch.setenv("DISCORD_TOKEN", "fake-token")
    monkeypatch.delenv("KERNELCUP_DISCORD__GUILD_IDS", raising=False)
    assert await sync_commands() == {"global": 2}
    assert sorted(c["name"] for c in fake.synced["global"]) == ["admin", "leaderboard"]


async def test_a_refused_token_is_logged_and_the_adapter_steps_aside(fake: FakeDiscord, settings: Settings,
                                                                     app: Kernelcup) -> None:
    fake.fail("GET", "/users/@me", 401, message="401: Unauthorized")
    bot = DiscordAdapter(settings, {"DISCORD_TOKEN": "revoked"})
    await bot.run(app)  # returns instead of raising into `kernelcup serve`
    await bot.stop()
    assert fake.find("GET", "/users/@me")[0].status == 401
