"""A fake Discord for the adapter's tests, and the only module that knows Discord's wire format.

``FakeDiscord`` is an aiohttp server on 127.0.0.1 that plays Discord's REST API (interaction
callbacks, webhooks, channel messages, threads, the CDN) for the real discord.py client, keeps
the messages it was sent, and can be told to fail: 429 with ``retry_after``, 5xx, an expired
interaction token, a deleted channel. The payload builders below make the gateway events that
Discord would send (INTERACTION_CREATE of every type). The private discord.py hooks the tests
need (``Route.BASE``, the guild cache, the connection's parser) are used here and nowhere else.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import discord
from aiohttp import BodyPartReader, web

APP_ID = 100000000000000001
GUILD_ID = 200000000000000001
SUBMIT_CHANNEL = 300000000000000001
OTHER_CHANNEL = 300000000000000002
ORGANIZERS_ROLE = 400000000000000001
ALICE = 500000000000000001  # a participant
ORGANIZER = 500000000000000002  # holds the Organizers role
ALL_PERMISSIONS = str((1 << 50) - 1)
FILE_LIMIT = 10 * 2**20
EPHEMERAL = 64

JsonObject = dict[str, Any]


@dataclass
class Call:
    method: str
    path: str  # after /api/v10
    query: dict[str, str]
    json: JsonObject | None
    files: dict[str, bytes]
    status: int = 0
    response: Any = None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Fault:
    method: str
    path: re.Pattern[str]
    status: int
    times: int
    body: JsonObject
    headers: dict[str, str]


class FakeDiscord:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[int, JsonObject] = {}
        self.threads: dict[int, JsonObject] = {}
        self.thread_members: list[tuple[int, int]] = []
        self.synced: dict[str, list[JsonObject]] = {}
        self.expired_tokens: set[str] = set()
        self.deleted_channels: set[int] = set()
        self.cdn: dict[str, bytes] = {}
        self._originals: dict[str, int] = {}  # interaction token -> its response message
        self._channel_of: dict[str, int] = {}  # interaction token -> its channel
        self._faults: list[Fault] = []
        self._ids = itertools.count(discord.utils.time_snowflake(datetime.now(UTC)))
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.base = ""

    # -- the server -------------------------------------------------------------------------------------

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 2**20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api(self) -> str:
        return f"{self.base}/api/v10"

    def fail(self, method: str, path: str, status: int, *, times: int = 1, retry_after: float = 0.0,
             code: int = 0, message: str = "") -> None:
        """Answer the next ``times`` requests matching ``method`` and the ``path`` regex with an error."""
        headers = {"Via": "1.1 google"}  # discord.py retries a 429 only when it came through Discord's proxy
        body: JsonObject = {"message": message or f"fake error {status}", "code": code}
        if status == 429:
            body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
            headers |= {"Retry-After": str(retry_after), "X-RateLimit-Scope": "user"}
        self._faults.append(Fault(method, re.compile(path), status, times, body, headers))

    async def wait_for(self, check: Callable[[Call], bool], *, timeout: float = 20.0, count: int = 1) -> list[Call]:
        """The calls ``check`` accepts, once there are ``count`` of them."""
        async with asyncio.timeout(timeout):
            while True:
                found = [call for call in self.calls if check(call)]
                if len(found) >= count:
                    return found
                self._changed.clear()
                await self._changed.wait()

    def find(self, method: str, path: str) -> list[Call]:
        pattern = re.compile(path)
        return [c for c in self.calls if c.method == method and pattern.fullmatch(c.path)]

    def in_channel(self, channel_id: int) -> list[JsonObject]:
        return [m for m in self.messages.values() if int(m["channel_id"]) == channel_id]

    def original(self, token: str) -> JsonObject:
        return self.messages[self._originals[token]]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if request.path.startswith("/cdn/"):
            content = self.cdn.get(request.path)
            self.calls.append(Call(request.method, request.path, {}, None, {}, 200 if content is not None else 404))
            self._changed.set()
            return web.Response(body=content) if content is not None else web.Response(status=404)
        payload, files = await _body(request)
        call = Call(request.method, request.path.removeprefix("/api/v10"), dict(request.query), payload, files)
        fault = next((f for f in self._faults if f.times > 0 and f.method == call.method
                      and f.path.fullmatch(call.path)), None)
        if fault is not None:
            fault.times -= 1
            status, body, headers = fault.status, fault.body, fault.headers
        else:
            status, body = self._route(call)
            headers = {}
        call.status, call.response = status, body
        self.calls.append(call)
        self._changed.set()
        if status == 204:
            return web.Response(status=204)
        # Exactly this content type: aiohttp's json_response adds a charset, which discord.py rejects.
        return web.Response(status=status, body=json.dumps(body).encode(),
                            headers={"Content-Type": "application/json", **headers})

    def _route(self, call: Call) -> tuple[int, Any]:
        for method, pattern, handler in _ROUTES:
            match = re.fullmatch(pattern, call.path)
            if match and call.method in method.split("|"):
                result: tuple[int, Any] = handler(self, call, **match.groupdict())
                return result
        return 404, {"message": f"no fake route for {call.method} {call.path}", "code": 0}

    # -- REST routes --------------------------------------------------------------------------------------

    def _me(self, call: Call) -> tuple[int, Any]:
        return 200, user_payload(APP_ID, "kernelcup", bot=True)

    def _application(self, call: Call) -> tuple[int, Any]:
        return 200, {"id": str(APP_ID), "name": "kernelcup", "description": "", "icon": None, "bot_public": False,
                     "bot_require_code_grant": False, "owner": user_payload(ORGANIZER, "organizer"),
                     "verify_key": "0" * 64, "flags": 0, "summary": ""}

    def _callback(self, call: Call, iid: str, token: str) -> tuple[int, Any]:
        if token in self.expired_tokens:
            return _expired()
        data = call.json or {}
        kind = data["type"]
        inner = data.get("data") or {}
        message = None
        if kind in (4, 5):  # a message, or "thinking" to be edited later
            flags = (inner.get("flags") or 0) | (128 if kind == 5 else 0)
            message = self._new_message(self._channel_of[token], inner, call.files, flags=flags)
            self._originals[token] = int(message["id"])
        elif kind == 7:  # update the message the component is on
            message = self._edit(self._originals[token], inner, call.files)
        interaction: JsonObject = {"id": iid, "type": 2, "response_message_loading": kind == 5,
                                   "response_message_ephemeral": bool((inner.get("flags") or 0) & EPHEMERAL)}
        if message is not None:
            interaction["response_message_id"] = message["id"]
        resource: JsonObject = {"type": kind}
        if message is not None:
            resource["message"] = message
        return 200, {"interaction": interaction, "resource": resource}

    def _webhook_message(self, call: Call, app: str, token: str, mid: str) -> tuple[int, Any]:
        if token in self.expired_tokens:
            return _expired()
        message_id = self._originals.get(token) if mid == "@original" else int(mid)
        if message_id is None or message_id not in self.messages:
            return 404, {"message": "Unknown Message", "code": 10008}
        if call.method == "DELETE":
            del self.messages[message_id]
            return 204, None
        if call.method == "PATCH":
            return 200, self._edit(message_id, call.json or {}, call.files)
        return 200, self.messages[message_id]

    def _followup(self, call: Call, app: str, token: str) -> tuple[int, Any]:
        if token in self.expired_tokens:
            return _expired()
        data = call.json or {}
        return 200, self._new_message(self._channel_of[token], data, call.files, flags=data.get("flags") or 0)

    def _create_message(self, call: Call, cid: str) -> tuple[int, Any]:
        if int(cid) in self.deleted_channels:
            return _unknown_channel()
        return 200, self._new_message(int(cid), call.json or {}, call.files)

    def _edit_channel_message(self, call: Call, cid: str, mid: str) -> tuple[int, Any]:
        if int(cid) in self.deleted_channels:
            return _unknown_channel()
        message = self.messages.get(int(mid))
        if message is None or message["flags"] & EPHEMERAL:
            return 404, {"message": "Unknown Message", "code": 10008}
        return 200, self._edit(int(mid), call.json or {}, call.files)

    def _thread(self, call: Call, cid: str, mid: str | None = None) -> tuple[int, Any]:
        if int(cid) in self.deleted_channels:
            return _unknown_channel()
        data = call.json or {}
        thread_id = int(mid) if mid else next(self._ids)  # a thread from a message shares its id
        thread = thread_payload(thread_id, int(cid), data["name"], private=not mid and data.get("type") == 12)
        self.threads[thread_id] = thread
        return 201, thread

    def _thread_member(self, call: Call, cid: str, uid: str) -> tuple[int, Any]:
        self.thread_members.append((int(cid), int(uid)))
        return 204, None

    def _sync(self, call: Call, app: str, gid: str = "global") -> tuple[int, Any]:
        commands: list[JsonObject] = call.json if isinstance(call.json, list) else []
        registered = [{**c, "id": str(next(self._ids)), "application_id": str(APP_ID), "version": "1",
                       "default_member_permissions": None} for c in commands]
        self.synced[gid] = registered
        return 200, registered

    # -- messages -----------------------------------------------------------------------------------------

    def _new_message(self, channel_id: int, data: JsonObject, files: dict[str, bytes], flags: int = 0
                     ) -> JsonObject:
        message_id = next(self._ids)
        message = message_payload(message_id, channel_id, flags=flags)
        self.messages[message_id] = message
        return self._edit(message_id, data, files)

    def _edit(self, message_id: int, data: JsonObject, files: dict[str, bytes]) -> JsonObject:
        message = self.messages[message_id]
        for key in ("content", "embeds", "components"):
            if key in data:
                message[key] = data[key] if data[key] is not None else ([] if key != "content" else "")
        kept = message["attachments"]
        if "attachments" in data:
            wanted = {str(a.get("id")) for a in data["attachments"] or []}
            kept = [a for a in kept if a["id"] in wanted]
        message["attachments"] = kept + [self._attachment(name, content) for name, content in files.items()]
        message["edited_timestamp"] = _now()
        return message

    def _attachment(self, name: str, content: bytes) -> JsonObject:
        return attachment_payload(self, next(self._ids), name, content)


def _expired() -> tuple[int, Any]:
    return 401, {"message": "Invalid Webhook Token", "code": 50027}


def _unknown_channel() -> tuple[int, Any]:
    return 404, {"message": "Unknown Channel", "code": 10003}


_ROUTES: list[tuple[str, str, Callable[..., tuple[int, Any]]]] = [
    ("GET", r"/users/@me", FakeDiscord._me),
    ("GET", r"/oauth2/applications/@me", FakeDiscord._application),
    ("POST", r"/interactions/(?P<iid>\d+)/(?P<token>[^/]+)/callback", FakeDiscord._callback),
    ("GET|PATCH|DELETE", r"/webhooks/(?P<app>\d+)/(?P<token>[^/]+)/messages/(?P<mid>@original|\d+)",
     FakeDiscord._webhook_message),
    ("POST", r"/webhooks/(?P<app>\d+)/(?P<token>[^/]+)", FakeDiscord._followup),
    ("POST", r"/channels/(?P<cid>\d+)/messages", FakeDiscord._create_message),
    ("PATCH", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)", FakeDiscord._edit_channel_message),
    ("POST", r"/channels/(?P<cid>\d+)/messages/(?P<mid>\d+)/threads", FakeDiscord._thread),
    ("POST", r"/channels/(?P<cid>\d+)/threads", FakeDiscord._thread),
    ("PUT", r"/channels/(?P<cid>\d+)/thread-members/(?P<uid>\d+)", FakeDiscord._thread_member),
    ("PUT", r"/applications/(?P<app>\d+)/guilds/(?P<gid>\d+)/commands", FakeDiscord._sync),
    ("PUT", r"/applications/(?P<app>\d+)/commands", FakeDiscord._sync),
]


async def _body(request: web.Request) -> tuple[Any, dict[str, bytes]]:
    """JSON, or multipart with ``payload_json`` and ``files[n]`` as discord.py sends files."""
    if request.content_type == "application/json":
        return await request.json(), {}
    if request.content_type.startswith("multipart/"):
        files: dict[str, bytes] = {}
        payload: Any = None
        reader = await request.multipart()
        async for part in reader:
            if not isinstance(part, BodyPartReader):
                continue
            if part.name == "payload_json":
                payload = json.loads(await part.text())
            elif part.filename:
                files[part.filename] = bytes(await part.read())
        return payload, files
    return None, {}


def _now() -> str:
    return datetime.now(UTC).isoformat()


# -- payloads Discord sends ---------------------------------------------------------------------------------


def user_payload(user_id: int, name: str, *, bot: bool = False) -> JsonObject:
    return {"id": str(user_id), "username": name, "global_name": name, "discriminator": "0", "avatar": None,
            "bot": bot, "public_flags": 0}


def member_payload(user_id: int, name: str, roles: tuple[int, ...] = ()) -> JsonObject:
    return {"user": user_payload(user_id, name), "roles": [str(r) for r in roles], "joined_at": _now(),
            "deaf": False, "mute": False, "flags": 0, "pending": False, "nick": None, "avatar": None,
            "permissions": ALL_PERMISSIONS}


def role_payload(role_id: int, name: str) -> JsonObject:
    return {"id": str(role_id), "name": name, "color": 0, "hoist": False, "position": 1 if role_id != GUILD_ID else 0,
            "permissions": "0", "managed": False, "mentionable": False, "flags": 0}


def channel_payload(channel_id: int, name: str) -> JsonObject:
    return {"id": str(channel_id), "type": 0, "guild_id": str(GUILD_ID), "name": name, "position": 0,
            "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None, "last_message_id": None,
            "rate_limit_per_user": 0, "flags": 0}


def thread_payload(thread_id: int, parent_id: int, name: str, *, private: bool) -> JsonObject:
    return {"id": str(thread_id), "type": 12 if private else 11, "guild_id": str(GUILD_ID),
            "parent_id": str(parent_id), "owner_id": str(APP_ID), "name": name, "last_message_id": None,
            "message_count": 0, "member_count": 1, "rate_limit_per_user": 0, "flags": 0,
            "thread_metadata": {"archived": False, "auto_archive_duration": 10080, "archive_timestamp": _now(),
                                "locked": False, "invitable": not private}}


def guild_payload() -> JsonObject:
    return {"id": str(GUILD_ID), "name": "kernel cup", "icon": None, "owner_id": str(ORGANIZER),
            "roles": [role_payload(GUILD_ID, "@everyone"), role_payload(ORGANIZERS_ROLE, "Organizers")],
            "channels": [channel_payload(SUBMIT_CHANNEL, "submissions"), channel_payload(OTHER_CHANNEL, "general")],
            "emojis": [], "stickers": [], "features": [], "threads": [], "members": [], "member_count": 3,
            "premium_tier": 0, "large": False, "unavailable": False, "verification_level": 0,
            "default_message_notifications": 0, "explicit_content_filter": 0, "mfa_level": 0,
            "system_channel_flags": 0, "preferred_locale": "en-US", "nsfw_level": 0, "afk_timeout": 300,
            "premium_progress_bar_enabled": False}


def message_payload(message_id: int, channel_id: int, *, flags: int = 0) -> JsonObject:
    return {"id": str(message_id), "channel_id": str(channel_id), "type": 0, "content": "",
            "author": user_payload(APP_ID, "kernelcup", bot=True), "embeds": [], "attachments": [],
            "components": [], "mentions": [], "mention_roles": [], "mention_everyone": False, "pinned": False,
            "tts": False, "timestamp": _now(), "edited_timestamp": None, "flags": flags,
            "webhook_id": str(APP_ID)}


def attachment_payload(fake: FakeDiscord, attachment_id: int, name: str, content: bytes) -> JsonObject:
    path = f"/cdn/attachments/{attachment_id}/{name}"
    fake.cdn[path] = content
    return {"id": str(attachment_id), "filename": name, "size": len(content), "url": fake.base + path,
            "proxy_url": fake.base + path, "content_type": "application/octet-stream"}


@dataclass
class Person:
    user_id: int
    name: str
    roles: tuple[int, ...] = ()


PARTICIPANT = Person(ALICE, "alice")
ORGANIZER_PERSON = Person(ORGANIZER, "olga", (ORGANIZERS_ROLE,))


def _interaction(fake: FakeDiscord, kind: int, data: JsonObject, *, person: Person, channel_id: int,
                 at: datetime | None = None, message: JsonObject | None = None) -> JsonObject:
    interaction_id = discord.utils.time_snowflake(at or datetime.now(UTC)) + next(fake._ids) % 4096
    token = f"token-{interaction_id}"
    fake._channel_of[token] = channel_id
    if message is not None:
        fake._originals[token] = int(message["id"])  # a component's response is the message it is on
    payload: JsonObject = {
        "id": str(interaction_id), "application_id": str(APP_ID), "type": kind, "token": token, "version": 1,
        "guild_id": str(GUILD_ID), "channel_id": str(channel_id),
        "channel": channel_payload(channel_id, "submissions" if channel_id == SUBMIT_CHANNEL else "general"),
        "member": member_payload(person.user_id, person.name, person.roles), "locale": "en-US",
        "guild_locale": "en-US", "app_permissions": ALL_PERMISSIONS, "entitlements": [],
        "authorizing_integration_owners": {"0": str(GUILD_ID)}, "context": 0,
        "attachment_size_limit": FILE_LIMIT, "data": data,
    }
    if message is not None:
        payload["message"] = message
    return payload


def slash(fake: FakeDiscord, group: str, command: str, *, files: dict[str, tuple[str, bytes]] | None = None,
          person: Person = PARTICIPANT, channel_id: int = SUBMIT_CHANNEL, at: datetime | None = None,
          focused: str | None = None, **values: Any) -> JsonObject:
    """A slash command (type 2), or its autocomplete (type 4) when ``focused`` names an option.

    ``files`` maps an option to (file name, content): the file is put on the fake CDN.
    """
    options: list[JsonObject] = []
    resolved: JsonObject = {}
    for option, (name, content) in (files or {}).items():
        attachment_id = next(fake._ids)
        resolved.setdefault("attachments", {})[str(attachment_id)] = attachment_payload(
            fake, attachment_id, name, content)
        options.append({"name": option, "type": 11, "value": str(attachment_id)})
    for option, value in values.items():
        kind = 5 if isinstance(value, bool) else 4 if isinstance(value, int) else 3
        entry: JsonObject = {"name": option, "type": kind, "value": value}
        if option == focused:
            entry["focused"] = True
        options.append(entry)
    data: JsonObject = {"id": str(next(fake._ids)), "name": group, "type": 1, "guild_id": str(GUILD_ID),
                        "options": [{"type": 1, "name": command, "options": options}]}
    if resolved:
        data["resolved"] = resolved
    return _interaction(fake, 4 if focused else 2, data, person=person, channel_id=channel_id, at=at)


def component(fake: FakeDiscord, message: JsonObject, custom_id: str, *, values: list[str] | None = None,
              person: Person = PARTICIPANT, at: datetime | None = None) -> JsonObject:
    """A click on a button (``values`` None) or a choice in a select menu (type 3)."""
    data: JsonObject = {"custom_id": custom_id, "component_type": 2 if values is None else 3}
    if values is not None:
        data["values"] = values
    return _interaction(fake, 3, data, person=person, channel_id=int(message["channel_id"]), at=at,
                        message=message)


def modal_submit(fake: FakeDiscord, custom_id: str, fields: dict[str, str], *, person: Person = PARTICIPANT,
                 channel_id: int = SUBMIT_CHANNEL) -> JsonObject:
    """The form a modal asked for, filled in (type 5); fields are in Label components."""
    rows = [{"type": 18, "id": i * 2 + 1, "component": {"type": 4, "id": i * 2 + 2, "custom_id": name,
                                                         "value": value}}
            for i, (name, value) in enumerate(fields.items())]
    return _interaction(fake, 5, {"custom_id": custom_id, "components": rows}, person=person,
                        channel_id=channel_id)


def embeds_of(call: Call) -> list[JsonObject]:
    """The embeds a request sent, whether as a message or inside an interaction callback."""
    body = call.json if isinstance(call.json, dict) else {}
    return list(body.get("embeds") or (body.get("data") or {}).get("embeds") or [])


def description_of(call: Call) -> str:
    return "\n".join(str(e.get("description") or "") for e in embeds_of(call))


def components_of(message: JsonObject) -> list[JsonObject]:
    """The buttons and menus of a message, flattened out of their rows."""
    return [item for row in message.get("components") or [] for item in row.get("components", [])]


# -- the private discord.py hooks -----------------------------------------------------------------------


async def log_in(client: discord.Client, fake: FakeDiscord) -> None:
    """Log the real client in against the fake (Route.BASE is set by the caller) and seed its
    guild cache the way a gateway GUILD_CREATE would."""
    await client.login("fake-token")
    client._connection._add_guild_from_data(guild_payload())  # type: ignore[arg-type]


def send_event(client: discord.Client, payload: JsonObject) -> None:
    """Hand an INTERACTION_CREATE to discord.py as the gateway would."""
    client._connection.parse_interaction_create(payload)  # type: ignore[arg-type]


async def listening(client: discord.Client, *, message_id: int | None = None, modal: str | None = None,
                    timeout: float = 60.0) -> None:
    """Wait until discord.py listens for a message's components (or a modal's submission).

    The fake sees a request before discord.py has read the answer and registered the view, so a
    test that clicks at once could click on a message the client does not know yet.
    """
    store = client._connection._view_store
    async with asyncio.timeout(timeout):
        while not (message_id in store._views if modal is None else modal in store._modals):
            await asyncio.sleep(0.01)
