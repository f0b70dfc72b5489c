"""A message edited in place while a submission runs.

Edits are throttled (chat.update is rate limited per channel); the newest state always wins and
the final one is always sent. If someone deletes the message, the next state is posted as a new
message instead, so the submitter still gets the result. Progress is shown only while
``still_owed`` says the report is owed: another process that delivered it is never covered up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import suppress

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from kernelcup.adapters.slack.blocks import SlackMessage

log = structlog.get_logger("kernelcup.slack")
GONE = {"message_not_found", "cant_update_message", "edit_window_closed"}
StillOwed = Callable[[], Awaitable[bool]]
Moved = Callable[[str, str], Awaitable[None]]  # (channel, ts) of the message posted instead


class LiveMessage:
    def __init__(self, client: AsyncWebClient, channel: str, ts: str, interval_s: float, *,
                 still_owed: StillOwed | None = None, on_moved: Moved | None = None) -> None:
        self.client = client
        self.channel = channel
        self.ts = ts
        self.interval_s = interval_s
        self.still_owed = still_owed
        self.on_moved = on_moved
        self._latest: SlackMessage | None = None
        self._dirty = asyncio.Event()
        self._closing = asyncio.Event()
        self._pump_task = asyncio.create_task(self._pump())

    @classmethod
    async def post(cls, client: AsyncWebClient, channel: str, message: SlackMessage, interval_s: float, *,
                   still_owed: StillOwed | None = None, on_moved: Moved | None = None) -> LiveMessage:
        response = await client.chat_postMessage(channel=channel, text=message.text, blocks=message.blocks)
        return cls(client, str(response["channel"]), str(response["ts"]), interval_s, still_owed=still_owed,
                   on_moved=on_moved)

    def show(self, message: SlackMessage) -> None:
        """The newest state; it reaches Slack within ``interval_s``, replacing any older one."""
        self._latest = message
        self._dirty.set()

    async def finish(self, message: SlackMessage) -> None:
        """Send the final state now (after an edit already on its way) and stop editing."""
        self._latest = message
        self._closing.set()
        self._dirty.set()
        await self._pump_task

    async def close(self) -> None:
        self._pump_task.cancel()
        with suppress(asyncio.CancelledError):
            await self._pump_task

    async def _pump(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            final = self._closing.is_set()
            # The message is taken before the check below awaits: a finish() during that await
            # leaves its report to the next turn, which sends it once (not here and there).
            message = self._latest
            if message is not None and (final or self.still_owed is None or await self.still_owed()):
                await self._push(message)
            if self._closing.is_set() and not self._dirty.is_set():
                return
            with suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.interval_s)

    async def _push(self, message: SlackMessage) -> None:
        try:
            await self.client.chat_update(channel=self.channel, ts=self.ts, text=message.text, blocks=message.blocks)
        except SlackApiError as exc:
            error = exc.response.get("error")
            if error not in GONE:
                log.warning("chat.update failed", channel=self.channel, ts=self.ts, error=error)
                return
            log.info("live message gone; posting a new one", channel=self.channel, ts=self.ts, error=error)
            try:
                response = await self.client.chat_postMessage(
                    channel=self.channel, text=message.text, blocks=message.blocks
                )
            except SlackApiError as again:
                log.warning("could not post the replacement message", channel=self.channel,
                            error=again.response.get("error"))
                return
            self.ts = str(response["ts"])
            if self.on_moved is not None:
                await self.on_moved(self.channel, self.ts)
