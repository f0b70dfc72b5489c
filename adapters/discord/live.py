"""A public message kept up to date while a submission runs, however long that takes.

An interaction's token lives 15 minutes; a ranked run in a long queue lives longer. While the
token is good, edits go through the interaction's webhook; after that (or as soon as Discord
answers 401 "Invalid Webhook Token") they go through the channel with the bot token, which may
edit the bot's own non-ephemeral messages. When the message is gone, a new one is posted.
A message followed again after a restart has no interaction at all: only the channel path.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

import aiohttp
import discord
import structlog

# The connection failing, not Discord answering: a server that hung up (aiohttp's
# ServerDisconnectedError), a reset, a timeout. discord.py retries only some of these itself.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError)

log = structlog.get_logger("kernelcup.discord")

INTERACTION_LIFETIME = timedelta(minutes=15)
INVALID_WEBHOOK_TOKEN = 50027  # Discord's JSON error code for an expired or unknown token


def token_expired(error: discord.HTTPException) -> bool:
    return error.status == 401 or error.code == INVALID_WEBHOOK_TOKEN


class LiveMessage:
    def __init__(
        self,
        client: discord.Client,
        interaction: discord.Interaction | None,
        *,
        message_id: int | None,
        channel_id: int,
        original: bool,
        owner_id: int | None,
        clock: Callable[[], datetime],
        token_margin_s: float,
        on_moved: Callable[[int], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.interaction = interaction  # None: followed again after a restart, no token to use
        self.message_id = message_id  # None: not posted yet; the first edit posts it
        self.channel_id = channel_id
        self.original = original  # the interaction's own response rather than a follow-up message
        self.owner_id = owner_id
        self.clock = clock
        self.on_moved = on_moved  # told the id of a message posted in place of the old one
        self._token_good_until = (interaction.created_at + INTERACTION_LIFETIME - timedelta(seconds=token_margin_s)
                                  if interaction is not None else None)
        self._token_dead = False

    @property
    def file_limit(self) -> int:
        """The largest file the destination takes."""
        if self.interaction is not None:
            return self.interaction.filesize_limit
        channel = self.client.get_channel(self.channel_id)
        guild = getattr(channel, "guild", None)
        return guild.filesize_limit if isinstance(guild, discord.Guild) else discord.utils.DEFAULT_FILE_SIZE_LIMIT_BYTES

    def token_usable(self) -> bool:
        return (not self._token_dead and self._token_good_until is not None
                and self.clock() < self._token_good_until)

    async def edit(self, embed: discord.Embed, content: str | None = None) -> None:
        """Show ``embed``; raises discord.HTTPException only when no way of showing it is left."""
        if self.interaction is not None and self.token_usable():
            try:
                if self.original:
                    await self.interaction.edit_original_response(content=content, embed=embed)
                else:
                    assert self.message_id is not None
                    await self.interaction.followup.edit_message(self.message_id, content=content, embed=embed)
                return
            except discord.HTTPException as error:
                if token_expired(error):
                    self._token_dead = True
                    log.info("interaction token expired; editing through the channel", message_id=self.message_id)
                elif not isinstance(error, discord.NotFound):
                    raise
                # NotFound: the message was deleted; the channel path below posts a new one.
        channel = self.client.get_partial_messageable(self.channel_id)
        if self.message_id is not None:
            try:
                await channel.get_partial_message(self.message_id).edit(content=content, embed=embed)
                return
            except (discord.NotFound, discord.Forbidden) as error:
                log.warning("live message gone; posting a new one", message_id=self.message_id,
                            channel_id=self.channel_id, status=error.status)
        mention = f"<@{self.owner_id}>" if self.owner_id is not None else None
        message = await channel.send(
            content=" ".join(part for part in (mention, content) if part) or None,
            embed=embed,
            allowed_mentions=discord.AllowedMentions(users=True, roles=False, everyone=False),
        )
        self.message_id = message.id
        self.original = False
        if self.on_moved is not None:
            await self.on_moved(message.id)


class ThrottledEdits:
    """Shows the newest state at most once per interval; states in between are skipped.

    A failed edit is logged and the next state tried: progress is a courtesy, the final result
    is edited separately by the caller, which also waits its turn through ``settle``.
    """

    def __init__(self, edit: Callable[[discord.Embed], Awaitable[None]], interval_s: float,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self._edit = edit
        self._interval_s = interval_s
        self._monotonic = monotonic
        self._pending: discord.Embed | None = None
        self._last = -float("inf")
        self._task: asyncio.Task[None] | None = None
        self.edits = 0

    def show(self, embed: discord.Embed) -> None:
        self._pending = embed
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def settle(self) -> None:
        """Let the pending state go out, then wait until the next edit is allowed."""
        if self._task is not None:
            await self._task
        await self._wait_turn()
        self._last = self._monotonic()

    async def _drain(self) -> None:
        while self._pending is not None:
            await self._wait_turn()
            embed, self._pending = self._pending, None
            try:
                await self._edit(embed)
                self.edits += 1
            except discord.HTTPException as error:
                log.warning("progress edit failed", status=error.status, code=error.code, error=error.text)
            except CONNECTION_ERRORS as error:
                # Escaping, it would end the drain and make ``settle`` raise before the result's edit.
                log.warning("progress edit failed", error=repr(error))
            finally:
                # Counted from when the edit is done, not begun: a slow edit (a loaded database
                # read, a slow request) must not let the next one follow it within the interval.
                self._last = self._monotonic()

    async def _wait_turn(self) -> None:
        wait = self._last + self._interval_s - self._monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
