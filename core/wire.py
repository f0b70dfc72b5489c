"""A Reply and an Attachment as JSON: the one form the HTTP API answers with, the remote CLI reads
back, the terminal's hand-off carries and ``--json`` prints.

Blocks are tagged by a lowercase ``type``. Bytes travel as UTF-8 text where they are text and as
base64 otherwise (``text`` or ``base64`` on files and attachments, ``png_base64`` on images).
``reply_from_wire(reply_to_wire(r)) == r`` for every reply (tests/core/test_wire.py); a block
type this module does not know comes back as its text, so an older reader still shows something.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from kernelcup.core.messages import (
    Attachment,
    Block,
    Code,
    File,
    Image,
    ProgressBlock,
    Refusal,
    Reply,
    Table,
    Text,
)

__all__ = [
    "attachment_from_wire",
    "attachment_to_wire",
    "block_from_wire",
    "block_to_wire",
    "reply_from_wire",
    "reply_to_wire",
]


def reply_to_wire(reply: Reply) -> dict[str, Any]:
    problem = reply.problem
    return {
        "ok": reply.ok,
        "ephemeral": reply.ephemeral,
        "submission_id": reply.submission_id,
        "choices": reply.choices,
        "problem": {"kind": problem.kind, "retry_after_s": problem.retry_after_s} if problem else None,
        "blocks": [block_to_wire(block) for block in reply.blocks],
        "text": reply.text(),  # every block's plain-text fallback, for a reader that draws nothing
    }


def reply_from_wire(raw: Mapping[str, Any]) -> Reply:
    problem = raw.get("problem")
    choices = raw.get("choices")
    return Reply(
        blocks=[block_from_wire(block) for block in raw.get("blocks") or []],
        ok=bool(raw.get("ok")),
        ephemeral=bool(raw.get("ephemeral")),
        submission_id=raw.get("submission_id"),
        choices={str(k): [str(v) for v in values] for k, values in choices.items()}
        if isinstance(choices, dict) else None,
        problem=Refusal(str(problem.get("kind")), problem.get("retry_after_s"))
        if isinstance(problem, dict) else None,
    )


def block_to_wire(block: Block) -> dict[str, Any]:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text, "style": block.style}
    if isinstance(block, Table):
        return {"type": "table", "columns": list(block.columns), "rows": [list(row) for row in block.rows],
                "title": block.title}
    if isinstance(block, Code):
        return {"type": "code", "code": block.code, "language": block.language}
    if isinstance(block, File):
        return {"type": "file", "name": block.name, "description": block.description, **_content(block.content)}
    if isinstance(block, Image):
        return {"type": "image", "name": block.name, "alt": block.alt,
                "png_base64": base64.b64encode(block.png).decode()}
    if isinstance(block, ProgressBlock):
        return {"type": "progress", "job_id": block.job_id, "gpu": block.gpu, "phase": block.phase,
                "done": block.done, "total": block.total, "queue_position": block.queue_position}
    raise TypeError(f"no wire form for {type(block).__name__}")


def block_from_wire(raw: Mapping[str, Any]) -> Block:
    kind = raw.get("type")
    if kind == "table":
        return Table(tuple(str(c) for c in raw["columns"]), tuple(tuple(str(c) for c in row) for row in raw["rows"]),
                     str(raw.get("title", "")))
    if kind == "code":
        return Code(str(raw["code"]), str(raw.get("language", "")))
    if kind == "file":
        return File(str(raw["name"]), _bytes(raw), str(raw.get("description", "")))
    if kind == "image":
        return Image(str(raw["name"]), base64.b64decode(raw["png_base64"]), str(raw.get("alt", "")))
    if kind == "progress":
        return ProgressBlock(int(raw["job_id"]), str(raw["gpu"]), str(raw["phase"]), int(raw.get("done", 0)),
                             int(raw.get("total", 0)), raw.get("queue_position"))
    return Text(str(raw.get("text", "")), str(raw.get("style", "plain")))


def attachment_to_wire(attachment: Attachment) -> dict[str, str]:
    return {"name": attachment.name, **_content(attachment.content)}


def attachment_from_wire(raw: Mapping[str, Any]) -> Attachment:
    """An attachment from ``text`` or ``base64``; a ``ValueError`` names what is wrong with it."""
    return Attachment(str(raw["name"]), _bytes(raw))


def _content(content: bytes) -> dict[str, str]:
    try:
        return {"text": content.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(content).decode()}


def _bytes(raw: Mapping[str, Any]) -> bytes:
    if raw.get("text") is not None:
        return str(raw["text"]).encode()
    return base64.b64decode(raw.get("base64") or "", validate=True)
