"""A local Slack: the Web API methods the adapter calls, file hosting (url_private), the upload
URLs of files_upload_v2, response URLs, and a Socket Mode websocket.

It speaks Slack's wire protocol to the real slack_sdk/Bolt clients: arguments arrive in query
strings, form bodies or JSON (the async client uses all three), answers are Slack's JSON. Every
call is recorded so tests can read what the bot did; failures can be queued per method.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

BOT_TOKEN = "xoxb-test-token"
APP_TOKEN = "xapp-test-token"
TEAM = "T1"
BOT_USER = "UBOT"
LOGIN_PAGE = "<!DOCTYPE html><html><body>Sign in to Slack</body></html>"


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    token: str | None


@dataclass
class Failure:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


class FakeSlack:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}  # (channel, ts) -> message
        self.hosted: dict[str, tuple[bytes, str]] = {}  # url_private path name -> (content, mimetype)
        self.downloads: list[str] = []
        self.uploads: dict[str, dict[str, Any]] = {}  # file id -> filename, length, content
        self.shared: list[dict[str, Any]] = []  # completed uploads with channel and thread_ts
        self.responses: list[dict[str, Any]] = []  # posts to response URLs
        self.socket_acks: list[dict[str, Any]] = []
        self.usergroups: list[dict[str, Any]] = []
        self.not_in: set[str] = set()  # channels the bot is not a member of
        self._failures: dict[str, list[Failure]] = {}
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._socket: web.WebSocketResponse | None = None
        self._socket_open = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.base = ""

    # -- life -------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_get("/files/{name}", self._file)
        app.router.add_post("/upload/{file_id}", self._upload)
        app.router.add_post("/response/{rid}", self._response)
        app.router.add_get("/socket", self._websocket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.base = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._socket is not None:
            await self._socket.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def response_url(self, rid: str = "r1") -> str:
        return f"{self.base}/response/{rid}"

    # -- test controls ----------------------------------------------------------------------

    def host_file(self, name: str, content: bytes, mimetype: str = "text/plain", **extra: Any) -> dict[str, Any]:
        """A file as Slack describes it in a message event, downloadable with the bot token."""
        self.hosted[name] = (content, mimetype)
        url = f"{self.base}/files/{name}"
        return {"id": f"F{next(self._ids)}", "name": name, "title": name, "mimetype": mimetype,
                "filetype": name.rsplit(".", 1)[-1], "pretty_type": name.rsplit(".", 1)[-1].upper(),
                "size": len(content), "mode": "hosted", "url_private": url, "url_private_download": url, **extra}

    def fail(self, method: str, *, status: int = 200, error: str = "fatal_error",
             headers: dict[str, str] | None = None, times: int = 1) -> None:
        self._failures.setdefault(method, []).extend(
            [Failure(status, {"ok": False, "error": error}, headers or {})] * times
        )

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def delete_message(self, channel: str, ts: str) -> None:
        del self.messages[(channel, ts)]

    async def wait_for(self, condition: Callable[[], Any], timeout: float = 20.0) -> Any:
        """Until ``condition()`` is truthy (its value is returned); re-checked after every call."""
        async with asyncio.timeout(timeout):
            while not (value := condition()):
                self._changed.clear()
                await self._changed.wait()
        return value

    async def socket_send(self, envelope: dict[str, Any]) -> None:
        await asyncio.wait_for(self._socket_open.wait(), 10)
        assert self._socket is not None
        await self._socket.send_json(envelope)

    def _record(self) -> None:
        self._changed.set()

    # -- the Web API ------------------------------------------------------------------------

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        params: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                params.update(await request.json())
            else:
                params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth else params.get("token")
        self.calls.append(Call(method, params, token))
        self._record()
        queued = self._failures.get(method)
        if queued:
            failure = queued.pop(0)
            return web.json_response(failure.body, status=failure.status, headers=failure.headers)
        expected = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
        if token != expected:
            return web.json_response({"ok": False, "error": "invalid_auth"})
        handler = getattr(self, "_" + method.replace(".", "_"), None)
        if handler is None:
            return web.json_response({"ok": False, "error": "unknown_method"})
        body: dict[str, Any] = handler(params)
        return web.json_response({"ok": "error" not in body, **body})

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"{self.base}/", "team": "Test", "user": "kernelcup", "team_id": TEAM, "user_id": BOT_USER,
                "bot_id": "B1"}

    def _apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.base.replace("http://", "ws://") + "/socket"}

    def _chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = str(params["channel"])
        if channel in self.not_in:
            return {"error": "not_in_channel"}
        ts = f"1700000000.{next(self._ids):06d}"
        message = {"text": params.get("text"), "blocks": _blocks(params), "thread_ts": params.get("thread_ts")}
        self.messages[(channel, ts)] = message
        return {"channel": channel, "ts": ts, "message": message}

    def _chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        key = (str(params["channel"]), str(params["ts"]))
        if key not in self.messages:
            return {"error": "message_not_found"}
        self.messages[key].update(text=params.get("text"), blocks=_blocks(params))
        return {"channel": key[0], "ts": key[1]}

    def _chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        if str(params["channel"]) in self.not_in:
            return {"error": "channel_not_found"}
        return {"message_ts": f"1700000000.{next(self._ids):06d}"}

    def _conversations_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"channel": {"id": "D" + str(params["users"])}}

    def _views_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"view": {"id": "V1", "hash": "h1", **_json(params["view"])}}

    def _views_update(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"view": {"id": params.get("view_id"), "hash": "h2", **_json(params["view"])}}

    def _users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        user = str(params["user"])
        return {"user": {"id": user, "name": user.lower(), "profile": {"display_name": f"user {user}"}}}

    def _usergroups_list(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"usergroups": self.usergroups}

    def _files_getUploadURLExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = f"F{next(self._ids)}"
        self.uploads[file_id] = {"filename": params.get("filename"), "length": int(params.get("length", 0))}
        return {"upload_url": f"{self.base}/upload/{file_id}", "file_id": file_id}

    def _files_completeUploadExternal(self, params: dict[str, Any]) -> dict[str, Any]:
        done = []
        for entry in _json(params["files"]):
            upload = self.uploads[entry["id"]]
            self.shared.append({**upload, "id": entry["id"], "title": entry.get("title"),
                                "channel": params.get("channel_id"), "thread_ts": params.get("thread_ts")})
            done.append({"id": entry["id"], "title": entry.get("title")})
        return {"files": done}

    # -- the rest of Slack's wire -----------------------------------------------------------

    async def _file(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.downloads.append(name)
        self._record()
        if request.headers.get("Authorization") != f"Bearer {BOT_TOKEN}" or name not in self.hosted:
            return web.Response(text=LOGIN_PAGE, content_type="text/html")  # what Slack does too
        content, mimetype = self.hosted[name]
        return web.Response(body=content, content_type=mimetype)

    async def _upload(self, request: web.Request) -> web.Response:
        self.uploads[request.match_info["file_id"]]["content"] = await request.read()
        self._record()
        return web.Response(text="OK")

    async def _response(self, request: web.Request) -> web.Response:
        self.responses.append({"rid": request.match_info["rid"], **await request.json()})
        self._record()
        return web.Response(text="ok")

    async def _websocket(self, request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)
        self._socket = socket
        await socket.send_json({"type": "hello", "num_connections": 1, "debug_info": {"host": "fake"}})
        self._socket_open.set()
        async for frame in socket:
            if frame.type == WSMsgType.TEXT:
                self.socket_acks.append(json.loads(frame.data))
                self._record()
        return socket


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _blocks(params: dict[str, Any]) -> list[dict[str, Any]]:
    return list(_json(params.get("blocks") or []))


def block_text(blocks: list[dict[str, Any]]) -> str:
    """Every text in Block Kit blocks, for assertions."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                out.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return "\n".join(out)
