"""Handing a terminal command to a ``kernelcup serve`` running on the same box and database.

A running server already has its store open, its schema checked and, on a GPU, a harness
waiting with torch imported and CUDA up; the embedded CLI would do all of that again for one
command. So ``serve`` listens on a unix socket in a folder of its own beside the SQLite database
(``var/kernelcup.sock.d/kernelcup.sock`` for ``var/kernelcup.db``; the same under the working
folder for any other database): the folder 0700, the socket 0600, so whoever can connect is the
local user who could open the database and run the command embedded anyway, and the server
checks the peer's uid as well. No token, no new secret.

The folder is the bot's own because the database's folder may not be: a user who could bind the
socket path first would receive the owner's files and orders. The server uses the folder only
where it is its user's with no bit for others; the client hands a command only to a socket whose
folder and socket are its own user's (or root's) and writable by no one else, and whose listening
process (SO_PEERCRED) is too. It checks before it sends a byte; anything else runs embedded, and
the reason is a warning in its log. (Not ``$XDG_RUNTIME_DIR``: a service, cron or sudo often has
none or another one, while the database URL names the same folder for the server and the CLI.)

The wire is JSON lines. The CLI sends one order (the command, its arguments, its files, the
terminal user's name, and a hash naming its database); the server answers ``accepted`` (or
``declined`` with a reason, e.g. another database), then the command's reply, then for a
submission each job event and the final report. The CLI renders them as the embedded path
would. Until ``accepted`` nothing has happened, so anything else (no socket, nothing listening,
a refusal, no answer within a few seconds) sends the CLI down the embedded path, with one debug
line in its log; after it the server owns the command and a lost connection is exit 3.

Stdlib only (asyncio's unix sockets): no ``remote`` extra, no web framework.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelcup.adapters.terminal.follow import show_progress
from kernelcup.core.config import Settings
from kernelcup.core.messages import Attachment, Reply
from kernelcup.core.pipeline.events import JobEvent
from kernelcup.core.private_paths import GROUP_OR_OTHERS_WRITE, exposure, trusted_owner
from kernelcup.core.wire import attachment_to_wire, reply_from_wire

if TYPE_CHECKING:
    from kernelcup.adapters.terminal.output import Output

VERSION = 1
SOCKET_NAME = "kernelcup.sock"
FOLDER_SUFFIX = ".sock.d"  # the socket's own folder, 0700: see the module's docstring
CONNECT_S = 2.0  # a unix socket connects at once or never: nothing listening is refused at once
ACCEPT_S = 5.0  # the server answers "accepted" before it does any work
_EVENT_FIELDS = {f.name for f in fields(JobEvent)}


def line_limit(settings: Settings) -> int:
    """The longest line either side reads: an order carries a file as base64."""
    return 4 * settings.limits.max_file_bytes + (1 << 20)


def sqlite_file(url: str) -> Path | None:
    """The database file of a ``sqlite:///...`` URL, resolved; None for any other database.
    Read without SQLAlchemy: the CLI decides whether to hand off before importing it."""
    scheme, sep, rest = url.partition(":///")
    if not sep or scheme.split("+")[0] != "sqlite":
        return None
    path = rest.split("?")[0]
    if not path or path == ":memory:" or path.startswith("file:"):
        return None
    return Path(path).resolve()


def socket_path(settings: Settings) -> Path:
    """Where ``serve`` listens: in ``<stem>.sock.d/`` beside the SQLite file, else in
    ``var/kernelcup.sock.d/`` under the working folder (where the terminal commands keep their log)."""
    database = sqlite_file(settings.database_url)
    if database is not None:
        return database.with_name(database.stem + FOLDER_SUFFIX) / SOCKET_NAME
    return Path("var", "kernelcup" + FOLDER_SUFFIX, SOCKET_NAME).resolve()


def database_identity(settings: Settings) -> str:
    """A hash naming the database (never the URL itself: it may hold a password), so a server on
    another database, sharing the socket folder, declines instead of taking the command."""
    database = sqlite_file(settings.database_url)
    name = f"sqlite:{database}" if database is not None else settings.database_url
    return hashlib.sha256(name.encode()).hexdigest()


# --- the wire ----------------------------------------------------------------------------------


def event_from_json(raw: dict[str, Any]) -> JobEvent:
    return JobEvent(**{k: v for k, v in raw.items() if k in _EVENT_FIELDS})


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


# --- the CLI's side ----------------------------------------------------------------------------


class ServerLost(Exception):
    """The server accepted the command, then the connection ended before its last answer."""


@dataclass
class Handoff:
    """What became of an attempt: ``exit_code`` when the server ran the command, else None and
    why not (for the one line in the log: a warning where the socket was ``refused`` as not this
    user's alone, else a debug line)."""

    exit_code: int | None
    reason: str = ""
    refused: bool = False


def socket_refusal(path: Path) -> str:
    """Why no order may go to the socket at ``path`` ("" where none): its folder and the socket
    must be this user's or root's and writable by no one else. FileNotFoundError where either is
    missing (no server)."""
    folder = os.lstat(path.parent)
    if not stat.S_ISDIR(folder.st_mode):
        return f"refused the hand-off socket: {path.parent} is not a folder"
    problem = exposure(path.parent, folder, GROUP_OR_OTHERS_WRITE)
    if problem is None:
        sock = os.lstat(path)
        if not stat.S_ISSOCK(sock.st_mode):
            return f"refused the hand-off socket: {path} is not a socket"
        problem = exposure(path, sock, GROUP_OR_OTHERS_WRITE)
    return "" if problem is None else f"refused the hand-off socket: {problem}"


async def hand_off(settings: Settings, command: str, args: dict[str, Any], attachments: list[Attachment],
                   user: str, renderer: Output) -> Handoff:
    """Run the command in the ``kernelcup serve`` of this database, if one answers."""
    path = socket_path(settings)
    try:
        refusal = socket_refusal(path)
    except FileNotFoundError:
        return Handoff(None, f"no server socket at {path}")
    if refusal:
        return Handoff(None, refusal, refused=True)
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_unix_connection(str(path), limit=line_limit(settings)), CONNECT_S)
    except (OSError, TimeoutError) as exc:
        return Handoff(None, f"nothing answers at {path}: {exc}")
    try:
        listener = peer_uid(writer)
        if listener is not None and not trusted_owner(listener):
            return Handoff(None, f"the process listening at {path} runs as uid {listener}, another user;"
                                 " nothing was sent to it", refused=True)
        order = {"kernelcup_handoff": VERSION, "database": database_identity(settings), "command": command,
                 "args": args, "attachments": [attachment_to_wire(a) for a in attachments], "user": user}
        try:
            writer.write(encode(order))
            await writer.drain()
            first = json.loads(await asyncio.wait_for(reader.readline(), ACCEPT_S) or b"{}")
        except (OSError, TimeoutError, ValueError) as exc:
            return Handoff(None, f"the server at {path} did not accept: {exc!r}")
        if first.get("type") != "accepted":
            return Handoff(None, f"the server at {path} declined: {first.get('reason', 'no answer')}")
        try:
            return Handoff(await _follow(reader, renderer))
        except (ServerLost, OSError, ValueError) as exc:
            renderer.fail(f"Lost the kernelcup server at {path}: {exc}")
            return Handoff(3)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _follow(reader: asyncio.StreamReader, renderer: Output) -> int:
    """Render the server's answers; the exit status as the embedded path gives it."""
    reply = reply_from_wire((await _message(reader, "reply"))["reply"])
    renderer.reply(reply)
    if reply.submission_id is None:
        return 0 if reply.ok else 1
    final: list[Reply] = []

    async def events() -> AsyncIterator[JobEvent]:
        while True:
            message = await _message(reader, "progress", "report")
            if message["type"] == "report":
                final.append(reply_from_wire(message["reply"]))
                return
            yield event_from_json(message["event"])

    await show_progress(events(), renderer.console)
    renderer.reply(final[0])
    return 0 if final[0].ok else 1


async def _message(reader: asyncio.StreamReader, *wanted: str) -> dict[str, Any]:
    line = await reader.readline()
    if not line:
        raise ServerLost("the connection closed before the command's end")
    message: dict[str, Any] = json.loads(line)
    if message.get("type") not in wanted:
        raise ServerLost(f"unexpected answer {str(message.get('type'))!r}")
    return message


def peer_uid(writer: asyncio.StreamWriter) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED); None where the platform cannot say."""
    import socket
    import struct

    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return None
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return int(uid)


def uid_allowed(uid: int | None) -> bool:
    """The server's own user, or root (who can read its database anyway)."""
    return uid is None or trusted_owner(uid)
