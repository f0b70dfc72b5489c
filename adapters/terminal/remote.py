"""The ``kernelcup`` commands against a remote server (``--server URL``): each command goes to the
server's HTTP API as ``POST /api/commands/{name}``, a submission is followed over server-sent
events with the same Rich progress, and the reply is rendered as if it came from the embedded
core. The token comes from KERNELCUP_TOKEN only (read by the CLI) (never a flag, which would end up in shell
history). The terminal needs no web framework for this: only httpx.
"""

from __future__ import annotations

import asyncio
import io
import json
import zipfile
from collections.abc import AsyncIterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import httpx
import yaml

from kernelcup.adapters.terminal.follow import show_progress
from kernelcup.adapters.terminal.output import Output
from kernelcup.core.commands.registry import Command, Kind
from kernelcup.core.messages import Attachment, Refusal, Reply
from kernelcup.core.pipeline.events import JobEvent
from kernelcup.core.wire import attachment_to_wire, reply_from_wire

RECONNECTS = 5  # a dropped event stream is reopened; the server restarts it from each job's state
_EVENT_FIELDS = {f.name for f in fields(JobEvent)}


class ServerUnreachable(Exception):
    """The server cannot be reached, or stopped answering."""


class RemoteKernelcup:
    """The few calls the CLI makes, over HTTP; ``transport`` lets tests swap the wire."""

    def __init__(self, server: str, token: str | None, *, transport: httpx.AsyncBaseTransport | None = None,
                 timeout_s: float = 120.0) -> None:
        self.server = server.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.http = httpx.AsyncClient(base_url=self.server, headers=headers, transport=transport,
                                      timeout=httpx.Timeout(timeout_s, connect=10.0))

    async def aclose(self) -> None:
        await self.http.aclose()

    async def handle(self, name: str, args: dict[str, Any], attachments: list[Attachment]) -> Reply:
        body: dict[str, Any] = {k: v for k, v in args.items() if v is not None and v != [] and v is not False}
        body["attachments"] = [attachment_to_wire(a) for a in attachments]
        return reply_of(await self._send("POST", f"/api/commands/{name}", json=body))

    async def report(self, submission_id: int) -> Reply:
        return reply_of(await self._send("GET", f"/api/submissions/{submission_id}/report"))

    async def follow(self, submission_id: int) -> AsyncIterator[JobEvent]:
        """Job events until the server says ``done``."""
        for _ in range(RECONNECTS):
            try:
                async with self.http.stream("GET", f"/api/submissions/{submission_id}/events",
                                            timeout=httpx.Timeout(None, connect=10.0)) as response:
                    if response.status_code != 200:
                        await response.aread()
                        raise ServerUnreachable(reply_of(response).text())
                    async for event, data in server_sent_events(response.aiter_lines()):
                        if event == "progress":
                            raw = json.loads(data)
                            # The API says ``state`` (core.pipeline.events.job_state), which reads
                            # the same through job_state again.
                            raw["status"] = raw.get("state")
                            yield JobEvent(**{k: v for k, v in raw.items() if k in _EVENT_FIELDS})
                        elif event == "done":
                            return
            except httpx.TransportError:
                await asyncio.sleep(1.0)
        raise ServerUnreachable(f"Lost {self.server} while following submission #{submission_id}.")

    async def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ServerUnreachable(f"Cannot reach the kernelcup server at {self.server}: {exc}") from exc


async def server_sent_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event, data) pairs from a text/event-stream; comments (keep-alive pings) are skipped."""
    event = "message"
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event = "message"
            data = []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)


def reply_of(response: httpx.Response) -> Reply:
    """The server's reply (or its error body) as the core's Reply, for the terminal renderer."""
    try:
        body = response.json()
    except ValueError:
        return Reply.error(f"The server answered {response.status_code}: {response.text.strip()[:300]}")
    if not isinstance(body, dict) or "blocks" not in body:
        detail = body.get("detail") if isinstance(body, dict) else body
        if not isinstance(detail, str):
            detail = json.dumps(detail)[:600]
        hint = body.get("hint", "") if isinstance(body, dict) else ""
        refused = Reply.error(f"{detail} ({response.status_code})", str(hint or ""))
        refused.problem = Refusal(str(body.get("kind") or "invalid")) if isinstance(body, dict) else None
        refused.choices = body.get("choices") if isinstance(body, dict) else None
        return refused
    return reply_from_wire(body)


def bundle_folders(cmd: Command, args: dict[str, Any], attachments: list[Attachment]) -> None:
    """A folder argument is a path on this machine: the server gets it as a zip instead, with the
    files task.yml takes from outside the folder (e.g. ../utils.py) beside task.yml."""
    for param in cmd.params:
        value = args.get(param.name)
        if param.kind is not Kind.FOLDER or not value:
            continue
        folder = Path(str(value))
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
            for path in sorted(p for p in folder.rglob("*") if p.is_file()):
                bundle.write(path, path.relative_to(folder).as_posix())
            for outside in _outside_sources(folder):
                bundle.write(outside, outside.name)
        attachments.append(Attachment(f"{folder.name}.zip", buffer.getvalue()))
        args[param.name] = f"{folder.name}.zip"


def _outside_sources(folder: Path) -> list[Path]:
    try:
        task = yaml.safe_load((folder / "task.yml").read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return []
    root = folder.resolve()
    out = []
    for entry in task.get("files") or []:
        source = (folder / str(entry.get("source", ""))).resolve() if isinstance(entry, dict) else None
        if source is not None and source.is_file() and root not in source.parents:
            out.append(source)
    return out


async def run_remote(cmd: Command, args: dict[str, Any], attachments: list[Attachment], server: str,
                     renderer: Output, token: str | None, *,
                     transport: httpx.AsyncBaseTransport | None = None) -> int:
    """Exit status as for the embedded core: 0 ok (a submission: every job passed), 1 failed,
    3 server unreachable."""
    bundle_folders(cmd, args, attachments)
    remote = RemoteKernelcup(server, token, transport=transport)
    try:
        reply = await remote.handle(cmd.name, args, attachments)
        renderer.reply(reply)
        if reply.submission_id is None:
            return 0 if reply.ok else 1
        await show_progress(remote.follow(reply.submission_id), renderer.console)
        final = await remote.report(reply.submission_id)
        renderer.reply(final)
        return 0 if final.ok else 1
    except ServerUnreachable as exc:
        renderer.fail(str(exc))
        return 3
    finally:
        await remote.aclose()
