"""The GitHub adapter: a webhook endpoint served by ``kernelcup serve`` (Starlette on uvicorn).

Each delivery must carry GitHub's signature of its body (``X-Hub-Signature-256``, the webhook
secret from the environment): one without it, or with a wrong one, gets 401 and a log line. A
delivery id seen before (``X-GitHub-Delivery``, kept in the database) is acknowledged and not
run again. Work happens after the acknowledgement: GitHub waits 10 seconds at most.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Generator, Mapping
from typing import Any

import structlog
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse
from starlette.routing import Route

from kernelcup.adapters.background import Background
from kernelcup.adapters.github.api import GitHubApi, GitHubApiError
from kernelcup.adapters.github.conversation import Conversation
from kernelcup.adapters.github.events import Events
from kernelcup.adapters.github.settings import TURN_ON, GitHubConfigError, GitHubSettings, configured
from kernelcup.adapters.github.signature import HEADER, verified
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings
from kernelcup.core.store.webhooks import first_delivery

log = structlog.get_logger("kernelcup.github")
SOURCE = "github"  # the deliveries' namespace in the database
MAX_BODY = 25 * 1024 * 1024  # GitHub caps a delivery's payload at 25 MB


class _Server(uvicorn.Server):
    """uvicorn without its own signal handlers: ``kernelcup serve`` owns SIGINT/SIGTERM."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class GitHubAdapter:
    name = "github"
    platform = "github"

    @classmethod
    def configured(cls, env: Mapping[str, str]) -> bool:
        return configured(env)

    def __init__(self, settings: Settings, env: Mapping[str, str]) -> None:
        self.settings = settings
        self.env = dict(env)
        self.ready = asyncio.Event()  # set once deliveries are served
        self.port: int | None = None  # the port actually bound (config port 0 picks one)
        self.github: GitHubSettings | None = None
        self.events: Events | None = None
        self.conversation: Conversation | None = None
        self.app: Kernelcup | None = None
        self.server: _Server | None = None
        self._stopping = False
        self.background = Background("GitHub", _refusal)
        self.spawn = self.background.spawn
        self.idle = self.background.idle

    async def run(self, app: Kernelcup) -> None:
        try:
            github = GitHubSettings.load(self.settings, self.env)
        except GitHubConfigError as exc:
            log.warning(f"adapter github is off: {exc} Then {TURN_ON}.")
            return
        self.github, self.app = github, app
        api = GitHubApi(github.api_url, github.token, timeout_s=github.timeout_s)
        self.conversation = Conversation(app, api, github)
        self.events = Events(app, self.conversation, github)
        web = Starlette(routes=[Route(github.path, self.receive, methods=["POST"])])
        self.server = _Server(uvicorn.Config(web, host=github.host, port=github.port, log_config=None,
                                             access_log=False, lifespan="off"))
        watcher = asyncio.create_task(self._announce_start())
        try:
            if not self._stopping:
                await self.server.serve()
        except SystemExit:  # uvicorn's answer to a port in use: the rest of the bot keeps serving
            log.error("github: cannot listen; webhooks are off", host=github.host, port=github.port,
                      hint="set github.port (KERNELCUP_GITHUB__PORT) to a free port")
        finally:
            watcher.cancel()
            await self.background.end()
            await api.aclose()

    async def stop(self) -> None:
        self._stopping = True
        if self.server is not None:
            self.server.should_exit = True

    async def receive(self, request: HttpRequest) -> JSONResponse:
        assert self.github is not None and self.app is not None and self.events is not None
        body = await request.body()
        delivery = request.headers.get("X-GitHub-Delivery", "")
        event = request.headers.get("X-GitHub-Event", "")
        if not verified(self.github.webhook_secret, body, request.headers.get(HEADER)):
            log.warning("github: delivery refused: bad or missing signature", delivery=delivery,
                        github_event=event,
                        client=request.client.host if request.client else None)
            return JSONResponse({"error": "bad signature"}, status_code=401)
        if len(body) > MAX_BODY or not delivery:
            return JSONResponse({"error": "no delivery id, or too large"}, status_code=400)
        try:
            payload = json.loads(body)
        except ValueError:
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        if event == "ping":
            return JSONResponse({"ok": True, "pong": True})
        engine, now = self.app.engine, self.app.now()
        if not await asyncio.to_thread(first_delivery, engine, SOURCE, delivery, now):
            log.info("github: repeated delivery ignored", delivery=delivery, github_event=event)
            return JSONResponse({"ok": True, "repeated": True})
        self.spawn(self.events.dispatch(event, payload))
        return JSONResponse({"ok": True}, status_code=202)

    async def _announce_start(self) -> None:
        assert self.server is not None and self.github is not None and self.conversation is not None
        while not self.server.started:
            await asyncio.sleep(0.05)
        sockets = [s for server in self.server.servers for s in (server.sockets or ())]
        self.port = sockets[0].getsockname()[1] if sockets else self.github.port
        log.info("github: serving webhooks", url=f"http://{self.github.host}:{self.port}{self.github.path}")
        self.ready.set()
        self.background.resume(self.conversation)


def _refusal(error: BaseException) -> dict[str, Any] | None:
    return {"error": str(error), "status": error.status} if isinstance(error, GitHubApiError) else None
