"""``kernelcup serve``'s side of the hand-off (adapters/terminal/handoff.py): a unix socket,
0600, in a folder of its own, 0700, on which terminal commands of this box and database arrive
and run in this process, on its warm runners, through the same ``Kernelcup.handle`` as every chat
command. A folder that is there already and is not this user's alone is refused, loudly: another
user may have made it to receive the commands (or to hold a socket of their own there)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import stat
import time
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from rich.console import Console
from rich.markup import escape

from kernelcup.adapters.terminal.handoff import (
    VERSION,
    database_identity,
    encode,
    line_limit,
    peer_uid,
    socket_path,
    uid_allowed,
)
from kernelcup.core.config import Settings
from kernelcup.core.messages import Actor, Request
from kernelcup.core.private_paths import GROUP_OR_OTHERS_ANY, Exposure, exposure
from kernelcup.core.wire import attachment_from_wire, reply_to_wire

if TYPE_CHECKING:
    from kernelcup.core.app import Kernelcup

log = structlog.get_logger("kernelcup.handoff")
ORDER_S = 10.0  # a client sends its order as soon as it connects


class HandoffListener:
    """Run by ``serve`` beside the adapters; not a chat (the console is still offered)."""

    name = "handoff"
    chat = False

    def __init__(self, settings: Settings, env: Mapping[str, str] | None = None, *, path: Path | None = None) -> None:
        self.settings = settings
        self.path = path or socket_path(settings)
        self.database = database_identity(settings)
        self._stopped = asyncio.Event()
        self._clients: set[asyncio.Task[Any]] = set()
        self._inode: int | None = None

    async def run(self, app: Kernelcup) -> None:
        server = await self._listen(app)
        if server is None:
            return
        try:
            await self._stopped.wait()
        finally:
            server.close()
            for task in list(self._clients):  # a client following a long job must not hold the stop
                task.cancel()
            await asyncio.gather(*self._clients, return_exceptions=True)
            self._remove_socket()

    async def stop(self) -> None:
        self._stopped.set()

    async def _listen(self, app: Kernelcup) -> asyncio.AbstractServer | None:
        try:
            problem = private_folder(self.path.parent)
            if problem is not None:
                _refuse_loudly(problem)
                return None
            if self.path.exists() or self.path.is_symlink():
                if await _answers(self.path):
                    log.warning("hand-off off: another kernelcup serve listens here", socket=str(self.path))
                    return None
                self.path.unlink()  # left by a server that died
            mask = os.umask(0o177)  # created 0600, never readable by others even for an instant
            try:
                server = await asyncio.start_unix_server(lambda r, w: self._client(app, r, w), path=str(self.path),
                                                         limit=line_limit(self.settings))
            finally:
                os.umask(mask)
            os.chmod(self.path, 0o600)
            self._inode = self.path.stat().st_ino
        except OSError as exc:
            log.warning("hand-off off: cannot listen", socket=str(self.path), error=str(exc))
            return None
        log.info("hand-off: terminal commands of this database run here", socket=str(self.path))
        return server

    def _remove_socket(self) -> None:
        with contextlib.suppress(OSError):
            if self._inode is not None and self.path.stat().st_ino == self._inode:
                self.path.unlink()

    async def _client(self, app: Kernelcup, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        try:
            uid = peer_uid(writer)
            if not uid_allowed(uid):
                log.warning("hand-off refused a connection from another user", uid=uid)
                return
            order = json.loads(await asyncio.wait_for(reader.readline(), ORDER_S) or b"{}")
            refusal = self._refusal(order)
            if refusal:
                writer.write(encode({"type": "declined", "reason": refusal}))
                await writer.drain()
                return
            writer.write(encode({"type": "accepted"}))
            await self._run(app, order, writer)
        except (OSError, TimeoutError, ValueError, KeyError, TypeError) as exc:
            # The client went away (Ctrl-C) or sent nonsense; a submission it started carries on.
            log.info("hand-off client gone", error=repr(exc))
        finally:
            self._clients.discard(task)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    def _refusal(self, order: Any) -> str:
        if not isinstance(order, dict) or order.get("kernelcup_handoff") != VERSION:
            return f"this server speaks hand-off version {VERSION}"
        if order.get("database") != self.database:
            return "this server runs on another database"
        if not isinstance(order.get("user"), str) or not isinstance(order.get("args"), dict):
            return "a malformed order"
        return ""

    async def _run(self, app: Kernelcup, order: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        user = order["user"]
        # The identity the embedded CLI would take (kernelcup.adapters.terminal.session.terminal_actor).
        # From a process of this machine's own user (the socket's owner checks): its paths are here.
        request = Request(actor=Actor(identity=f"console:{user}", display_name=user), command=str(order["command"]),
                          args=dict(order["args"]),
                          attachments=[attachment_from_wire(a) for a in order.get("attachments") or []],
                          from_this_machine=True)
        log.info("hand-off command", command=request.command, actor=request.actor.identity)
        began = time.monotonic()
        reply = await app.handle(request)
        writer.write(encode({"type": "reply", "reply": reply_to_wire(reply)}))
        await writer.drain()
        if reply.submission_id is None:
            return
        async for event in app.follow(reply.submission_id):
            writer.write(encode({"type": "progress", "event": asdict(event)}))
            await writer.drain()
        report = await app.submission_report(reply.submission_id)
        writer.write(encode({"type": "report", "reply": reply_to_wire(report)}))
        await writer.drain()
        # The bot's own time for the submission, from the order to the report (bench/cli_latency.py).
        log.info("hand-off submission done", submission_id=reply.submission_id,
                 elapsed_s=round(time.monotonic() - began, 3))


def private_folder(folder: Path) -> Exposure | None:
    """Make ``folder`` 0700 where it is missing; None once it is a folder of this user's with no
    bit for anyone else, else what is wrong with it (it is then left as it is)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)  # a link is refused, never followed
    if not stat.S_ISDIR(info.st_mode):
        return Exposure(folder, "is not a folder (a link or a file)", f"rm {shlex.quote(str(folder))}")
    return exposure(folder, info, GROUP_OR_OTHERS_ANY, owner_only=True)


def _refuse_loudly(problem: Exposure) -> None:
    """The log and the operator's console: the hand-off stays off, the rest of serve runs."""
    log.error("hand-off off: its socket folder is not this user's alone; terminal commands run embedded",
              folder=str(problem.path), problem=problem.problem, fix=problem.fix)
    Console(stderr=True).print(f"[bold red]kernelcup serve: the hand-off socket is off: {escape(str(problem))}."
                               "[/bold red] Another user may be waiting there for your commands. "
                               f"Fix: {escape(problem.fix)}", highlight=False, soft_wrap=True)


async def _answers(path: Path) -> bool:
    try:
        _reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(path)), 2.0)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
