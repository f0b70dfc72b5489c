"""The web adapter: the pages and the REST API served by uvicorn inside ``kernelcup serve``.

It is on by default (``web.enabled``) and listens on 127.0.0.1, so the embedded default has
pages to look at without exposing anything; put a TLS proxy in front to publish it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Generator, Mapping

import structlog
import uvicorn
from fastapi import FastAPI

from kernelcup.adapters.web.app import create_app
from kernelcup.adapters.web.connections import (
    ConnectionGuard,
    ConnectionLimits,
    connection_cap,
    guarded_protocol,
    raise_descriptor_limit,
)
from kernelcup.adapters.web.settings import WebSettings, configured
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings
from kernelcup.core.logging import ThrottledRecords, throttle_accept_errors

log = structlog.get_logger("kernelcup.web")
GRACEFUL_SHUTDOWN_S = 5  # open event streams are closed after this on stop


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: ``kernelcup serve`` owns SIGINT/SIGTERM and stops
    every adapter itself."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def server_config(app: FastAPI, web: WebSettings, guard: ConnectionGuard) -> uvicorn.Config:
    """uvicorn as kernelcup runs it: its own keep-alive, header size and concurrency settings,
    and the guarded protocol for the deadlines and the connection cap it lacks."""
    limits = guard.limits
    return uvicorn.Config(app, host=web.host, port=web.port, log_config=None, access_log=False, lifespan="off",
                          timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, http=guarded_protocol(guard),
                          timeout_keep_alive=max(1, round(web.keep_alive_s)),
                          h11_max_incomplete_event_size=web.max_header_bytes,
                          # a second line: 503 once more requests than connections are in flight
                          limit_concurrency=limits.max_connections + 1)


def connection_guard(web: WebSettings) -> ConnectionGuard:
    """The limits in force: the descriptor limit is raised first, then the cap kept below it."""
    descriptors = raise_descriptor_limit()
    cap = connection_cap(web.max_connections, descriptors)
    if cap < web.max_connections:
        log.warning("web: fewer connections than configured", max_connections=cap, configured=web.max_connections,
                    descriptor_limit=descriptors, hint="raise the hard limit on open files (ulimit -Hn)")
    return ConnectionGuard(ConnectionLimits(web.header_timeout_s, web.body_timeout_s, cap))


def quiet_floods(loop: asyncio.AbstractEventLoop) -> None:
    """A flood of connections must not become a flood of log: failed accepts and uvicorn's
    per-connection warnings (invalid request, concurrency limit) are throttled."""
    throttle_accept_errors(loop)
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, ThrottledRecords) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(ThrottledRecords())


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
        self.guard: ConnectionGuard | None = None
        self.http_app: FastAPI | None = None  # the ASGI app served (its state holds the event streams)
        self.ready = asyncio.Event()
        self._stopping = False

    async def run(self, app: Kernelcup) -> None:
        quiet_floods(asyncio.get_running_loop())
        self.guard = connection_guard(self.web)
        self.http_app = create_app(app, self.web)
        self.server = _Server(server_config(self.http_app, self.web, self.guard))
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
