"""What crosses the adapter boundary: a platform-neutral ``Request`` in, a ``Reply`` out.

A reply is a short list of blocks. Every block has a plain-text fallback, so an adapter that has
nothing better for a block still renders it; long text becomes a file, never a cut message.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelcup.core.roles import Role


@dataclass(frozen=True)
class Actor:
    identity: str  # platform-namespaced: "discord:1234", "slack:T1/U2", "console:alice"
    display_name: str
    platform_roles: tuple[str, ...] = ()  # e.g. "discord-role:Organizers", resolved by config


@dataclass(frozen=True)
class Attachment:
    name: str
    content: bytes


@dataclass
class Request:
    actor: Actor
    command: str  # a name from the command registry, e.g. "submit"
    args: dict[str, Any] = field(default_factory=dict)
    attachments: list[Attachment] = field(default_factory=list)
    reply_to: str | None = None  # opaque to the core; the adapter knows where to answer
    role: Role = Role.USER  # filled in by the core from config, never trusted from the adapter
    # Set only by the terminal on the bot's own machine (embedded or handed over its socket): a
    # folder argument may then be a path here. Never from an identity: a token may be console:'s.
    from_this_machine: bool = False
    # Set by an adapter that shows pictures (Discord, Slack): replies may then carry charts as
    # Image blocks (``kernelcup.core.charts``); elsewhere they stay text and tables.
    pictures: bool = False


@dataclass(frozen=True)
class Text:
    text: str
    # "plain", "title", "success", "error", "warning", "hint"; "markdown": the text is Markdown
    # (a leaderboard's description), drawn by an adapter that can and shown as it is elsewhere.
    style: str = "plain"

    def fallback(self) -> str:
        return self.text


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    title: str = ""

    def fallback(self) -> str:
        widths = [len(c) for c in self.columns]
        for row in self.rows:
            widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
        lines = [self.title] if self.title else []
        lines.append("  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)))
        lines.extend(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in self.rows
        )
        return "\n".join(lines)


@dataclass(frozen=True)
class Code:
    code: str
    language: str = ""

    def fallback(self) -> str:
        return self.code


@dataclass(frozen=True)
class File:
    name: str
    content: bytes
    description: str = ""

    def fallback(self) -> str:
        return f"[file {self.name}, {len(self.content)} bytes] {self.description}".rstrip()


@dataclass(frozen=True)
class Image:
    name: str
    png: bytes
    alt: str

    def fallback(self) -> str:
        return f"[image {self.name}] {self.alt}"


@dataclass(frozen=True)
class ProgressBlock:
    """A live status line for one job; adapters edit it in place as events arrive."""

    job_id: int
    gpu: str
    phase: str  # queued, compiling, testing, benchmarking, profiling, done, failed
    done: int = 0
    total: int = 0
    queue_position: int | None = None

    def fallback(self) -> str:
        if self.phase == "queued" and self.queue_position is not None:
            return f"[{self.gpu}] queued, position {self.queue_position}"
        if self.total:
            return f"[{self.gpu}] {self.phase} {self.done}/{self.total}"
        return f"[{self.gpu}] {self.phase}"


Block = Text | Table | Code | File | Image | ProgressBlock


@dataclass(frozen=True)
class Refusal:
    """Why a request was refused, in words an adapter can map (the web to an HTTP status).

    ``kind``: invalid, not_found, forbidden, too_large, refused, rate_limited, needs_choice,
    internal (``kernelcup.core.errors``' kinds, plus the core's own two).
    """

    kind: str
    retry_after_s: float | None = None  # rate_limited: when one more request will be accepted


@dataclass
class Reply:
    blocks: list[Block] = field(default_factory=list)
    ok: bool = True  # False when the request was refused or failed
    ephemeral: bool = False  # shown only to the requester where the platform can
    submission_id: int | None = None  # set when the reply starts a submission to follow
    # Set when the request lacks a value the platform can ask for with a menu: param -> options.
    choices: dict[str, list[str]] | None = None
    problem: Refusal | None = None  # set by the core when it refused the request

    def text(self) -> str:
        return "\n\n".join(block.fallback() for block in self.blocks)

    @classmethod
    def error(cls, message: str, hint: str = "") -> Reply:
        blocks: list[Block] = [Text(message, style="error")]
        if hint:
            blocks.append(Text(hint, style="hint"))
        return cls(blocks=blocks, ok=False, ephemeral=True)
