"""The web adapter: the pages and the REST API served by uvicorn inside ``kernelcup serve``.

It is on by default (``web.enabled``) and listens on 127.0.0.1, so the embedded default has
pages to look at without exposing anything; put a TLS proxy in front to publish it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator, Mapping

import structlog
import uvicorn

from adapters.web.app import create_app
from adapters.web.settings import WebSettings, configured
from core.app import Kernelcup
from core.config import Settings

log = structlog.get_logger("kernelcup.web")
GRACEFUL_SHUTDOWN_S = 5  # open event streams are closed after this on stop


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: ``kernelcup serve`` owns SIGINT/SIGTERM and stops
    every adapter itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class WebAdapter:
    name = "web"
    platform = "web"
    chat = False  # pages and an API, not a chat: ``serve`` still offers the console beside it

    @classmethod
    def configured(cls, env: Mapping[str, str]) -> bool:
        return configured(env)

    def __init__(self, settings: Settings, env: Mapping[str, str]) -> None:
        self.web = WebSettings.load(settings)
        self.server: _Server | None = None
        self.port: int | None = None  # the port actually bound (config port 0 picks a free one)
        self.ready = asyncio.Event()
        self._stopping = False

    async def run(self, app: Kernelcup) -> None:
        config = uvicorn.Config(create_app(app, self.web), host=self.web.host, port=self.web.port, log_config=None,
                                access_log=False, lifespan="off", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
        self.server = _Server(config)
        if self._stopping:
            return
        watcher = asyncio.create_task(self._announce_start())
        try:
            await self.server.serve()
        except SystemExit:  # uvicorn's answer to a port in use: the rest of the bot keeps serving
            log.error("web: cannot listen; pages and API are off", host=self.web.host, port=self.web.port,
                      hint="set web.port (KERNELCUP_WEB__PORT) to a free port, or web.enabled: false")
        finally:
            watcher.cancel()

    async def _announce_start(self) -> None:
        assert self.server is not None
        while not self.server.started:
            await asyncio.sleep(0.05)
        sockets = [s for server in self.server.servers for s in (server.sockets or ())]
        self.port = sockets[0].getsockname()[1] if sockets else self.web.port
        log.info("web: serving", url=f"http://{self.web.host}:{self.port}/", public_url=self.web.public_url or None)
        self.ready.set()

    async def stop(self) -> None:
        self._stopping = True
        if self.server is not None:
            self.server.should_exit = True
