"""The Slack adapter: one Bolt app (async) served over Socket Mode or HTTP.

Socket Mode (an app-level token; the bot dials out, no public URL) is the default whenever
SLACK_APP_TOKEN is set, which suits a self-hosted bot. HTTP mode serves Slack's requests on a
host and port behind your public URL and refuses any request whose signature or timestamp is
wrong (Bolt's request verification, with SLACK_SIGNING_SECRET). Once connected, it follows
again the submissions whose report it still owes (the bot stopped while they ran).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import aiohttp
import structlog
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from kernelcup.adapters.background import Background
from kernelcup.adapters.slack.conversation import Conversation
from kernelcup.adapters.slack.files import upload
from kernelcup.adapters.slack.listeners import Listeners
from kernelcup.adapters.slack.people import People
from kernelcup.adapters.slack.settings import SlackSettings, configured
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings
from kernelcup.core.messages import Reply

log = structlog.get_logger("kernelcup.slack")
RATE_LIMIT_RETRIES = 3  # each waits the Retry-After Slack sends


class SlackAdapter:
    name = "slack"
    platform = "slack"  # the key under `announcements:` in config

    @classmethod
    def configured(cls, env: Mapping[str, str]) -> bool:
        return configured(env)

    def __init__(self, settings: Settings, env: Mapping[str, str]) -> None:
        self.settings = settings
        self.slack = SlackSettings.load(settings, env)
        # Our own client: Bolt would otherwise build one for slack.com. Rate limits are retried
        # after Slack's Retry-After instead of failing the reply.
        self.client = AsyncWebClient(token=self.slack.bot_token, base_url=self.slack.api_url)
        self.client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES))
        self.ready = asyncio.Event()  # set once Slack's requests can arrive
        self.port: int | None = None  # HTTP mode: the port actually bound (config port 0 picks one)
        self.bolt: AsyncApp | None = None
        self.conversation: Conversation | None = None
        self._stopped = asyncio.Event()
        self.background = Background("Slack", _refusal)
        self.spawn = self.background.spawn
        self.idle = self.background.idle

    def build(self, app: Kernelcup, http: aiohttp.ClientSession) -> AsyncApp:
        """The Bolt app with every listener; no network until a request arrives."""
        bolt = AsyncApp(client=self.client, signing_secret=self.slack.signing_secret, name="kernelcup")
        self.conversation = Conversation(app, self.client, update_interval_s=self.slack.update_interval_s)
        people = People(self.client, app.settings, group_cache_s=self.slack.usergroup_cache_s)
        Listeners(app, self.conversation, people, http, command=self.slack.command, bot_token=self.slack.bot_token,
                  spawn=self.spawn).attach(bolt)
        self.bolt = bolt
        return bolt

    async def run(self, app: Kernelcup) -> None:
        async with aiohttp.ClientSession() as http:
            bolt = self.build(app, http)
            app.announcements.register(self)
            try:
                if self.slack.mode == "socket":
                    await self._serve_socket(bolt)
                else:
                    await self._serve_http(bolt)
            finally:
                app.announcements.unregister(self)
                await self.background.end()

    async def stop(self) -> None:
        self._stopped.set()

    async def announce(self, channel: str, reply: Reply) -> None:
        """Block Kit in the configured channel, its files in the message's thread."""
        assert self.conversation is not None, "announce before run()"
        message = self.conversation.render(reply)
        response = await self.client.chat_postMessage(channel=channel, text=message.text, blocks=message.blocks)
        await upload(self.client, str(response["channel"]), str(response["ts"]), message.files)

    def _connected(self) -> None:
        self.ready.set()
        assert self.conversation is not None
        self.background.resume(self.conversation)

    async def _serve_socket(self, bolt: AsyncApp) -> None:
        handler = AsyncSocketModeHandler(bolt, self.slack.app_token, web_client=self.client)
        await handler.connect_async()  # type: ignore[no-untyped-call]
        log.info("Slack connected (Socket Mode)")
        self._connected()
        try:
            await self._stopped.wait()
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]

    async def _serve_http(self, bolt: AsyncApp) -> None:
        async def dispatch(request: web.Request) -> web.Response:
            return await to_aiohttp_response(await bolt.async_dispatch(await to_bolt_request(request)))

        web_app = web.Application()
        web_app.router.add_post(self.slack.path, dispatch)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.slack.host, self.slack.port)
        await site.start()
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.slack.port
        log.info("Slack requests served (HTTP mode)", host=self.slack.host, port=self.port, path=self.slack.path)
        self._connected()
        try:
            await self._stopped.wait()
        finally:
            await runner.cleanup()


def _refusal(error: BaseException) -> dict[str, Any] | None:
    """Slack said no (an expired trigger, a hash conflict...)."""
    return {"error": error.response.get("error")} if isinstance(error, SlackApiError) else None
