"""The Discord adapter: a discord.py client whose slash commands are the core's commands.

``kernelcup serve`` starts it when ``DISCORD_TOKEN`` is set. It needs no privileged intent:
interactions carry the member and their roles, and the guilds intent keeps role names and
channels in the cache. The command tree is registered with Discord only on demand
(``python -m kernelcup.adapters.discord sync-commands``, or ``discord.sync_commands_on_start``), since
Discord rate-limits registration and the tree rarely changes. Each time the client is ready
(connected, guilds cached) it follows again the submissions whose report it still owes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import discord
import structlog
from discord import app_commands

from kernelcup.adapters.discord.conversation import Conversations
from kernelcup.adapters.discord.render import batches, discord_files, render_reply
from kernelcup.adapters.discord.settings import TOKEN_ENV, DiscordSettings, configured
from kernelcup.adapters.discord.tree import build_groups
from kernelcup.core.config import Settings
from kernelcup.core.messages import Reply

if TYPE_CHECKING:
    from kernelcup.core.app import Kernelcup

log = structlog.get_logger("kernelcup.discord")


class DiscordAdapter:
    name = "discord"
    platform = "discord"  # the key under `announcements:` in config

    @classmethod
    def configured(cls, env: Mapping[str, str]) -> bool:
        return configured(env)

    def __init__(self, settings: Settings, env: Mapping[str, str], *,
                 clock: Callable[[], datetime] = discord.utils.utcnow) -> None:
        self.settings = settings
        self.config = DiscordSettings.from_settings(settings)
        self.token = env.get(TOKEN_ENV, "").strip()
        intents = discord.Intents.none()
        intents.guilds = True
        self.client = discord.Client(intents=intents)
        self.tree = app_commands.CommandTree(self.client)
        self.tree.error(self._tree_error)
        self.conversations = Conversations(self.client, settings, self.config, clock)
        guilds = [discord.Object(id=guild) for guild in self.config.guild_ids]
        for group in build_groups(self.conversations.on_command, self.conversations.complete):
            if guilds:
                self.tree.add_command(group, guilds=guilds)
            else:
                self.tree.add_command(group)
        self.app: Kernelcup | None = None

        @self.client.event
        async def on_ready() -> None:
            await self.resume()

    def attach(self, app: Kernelcup) -> None:
        """Serve ``app``: commands go to it and its announcements come here."""
        self.app = app
        self.conversations.attach(app)
        app.announcements.register(self)

    async def run(self, app: Kernelcup) -> None:
        self.attach(app)
        try:
            await self.client.login(self.token)
        except discord.LoginFailure:
            log.error(f"Discord refused the bot token; check {TOKEN_ENV}. The Discord adapter is not running.")
            return
        if self.config.sync_commands_on_start:
            await self.sync_commands()
        log.info("discord connecting", guilds=list(self.config.guild_ids) or "global")
        await self.client.connect(reconnect=True)

    async def resume(self) -> int:
        """Follow again the submissions whose report is owed; how many. Never raises."""
        if self.app is None:
            return 0
        try:
            return await self.conversations.resume()
        except Exception:
            log.exception("could not follow the unfinished submissions again")
            return 0

    async def stop(self) -> None:
        if self.app is not None:
            self.app.announcements.unregister(self)
        await self.conversations.close()
        await self.client.close()

    async def sync_commands(self) -> dict[str, int]:
        """Register the command tree with Discord: per configured guild, or globally."""
        counts: dict[str, int] = {}
        if self.config.guild_ids:
            for guild in self.config.guild_ids:
                counts[str(guild)] = len(await self.tree.sync(guild=discord.Object(id=guild)))
        else:
            counts["global"] = len(await self.tree.sync())
        log.info("discord commands synced", counts=counts)
        return counts

    async def announce(self, channel: str, reply: Reply) -> None:
        """Post an announcement in the configured channel, all pages and files of it."""
        target = self.client.get_partial_messageable(int(channel))
        rendered = render_reply(reply, page_chars=self.config.page_chars)
        files = batches(rendered.files)
        for index, page in enumerate(rendered.pages):
            await target.send(embed=page.embed(), files=discord_files(files[index] if index < len(files) else []))
        for batch in files[len(rendered.pages):]:
            await target.send(files=discord_files(batch))

    async def _tree_error(self, interaction: discord.Interaction, error: app_commands.AppCommandError) -> None:
        """Errors discord.py meets before our callback runs (an unknown or outdated command)."""
        log.warning("discord command error", error=str(error), command=getattr(interaction.command, "name", None))
        message = ("This command is out of date; an admin should sync the commands." if
                   isinstance(error, app_commands.CommandNotFound | app_commands.CommandSignatureMismatch)
                   else "That command could not be run.")
        try:
            if interaction.response.is_done():
                await interaction.followup.send(message, ephemeral=True)
            else:
                await interaction.response.send_message(message, ephemeral=True)
        except discord.HTTPException:
            pass
