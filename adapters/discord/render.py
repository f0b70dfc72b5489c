"""Neutral reply blocks as Discord messages: embeds for answers, plain messages for details.

Discord caps a message at 2000 characters, an embed's text at 4096 and a message at 10 files.
Nothing is ever cut: a table too long for a page is split between rows (header repeated) onto
pages, any other text too long for its place becomes a file, and files go out ten per message.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import discord

from kernelcup.core.messages import Block, Code, File, Image, ProgressBlock, Reply, Table, Text

MESSAGE_CHARS = 2000
DETAIL_PIECE_CHARS = 1900  # a piece of a detail message; leaves room to join pieces
TITLE_CHARS = 256
FILES_PER_MESSAGE = 10
DEFAULT_FILE_LIMIT = 10 * 2**20  # what Discord takes from a bot where the server has no boost

BLURPLE = 0x5865F2
GREEN = 0x57F287
YELLOW = 0xFEE75C
RED = 0xED4245

_PREFIX = {"warning": "⚠️ ", "hint": "💡 "}


@dataclass
class Page:
    """One screen of a reply: an embed's title and text, and the image it shows, if any."""

    title: str
    text: str
    colour: int
    image: str | None = None  # the name of an attached image

    def embed(self) -> discord.Embed:
        embed = discord.Embed(title=self.title or None, description=self.text or None, colour=self.colour)
        if self.image:
            embed.set_image(url=f"attachment://{self.image}")
        return embed


@dataclass
class Rendered:
    pages: list[Page]
    files: list[File] = field(default_factory=list)  # attachments of the whole reply, any number


@dataclass
class Detail:
    """A plain message of a submission's details thread."""

    content: str
    files: list[File] = field(default_factory=list)


def discord_files(files: Iterable[File]) -> list[discord.File]:
    """Fresh ``discord.File`` objects: each can be sent once, so build them per request."""
    return [discord.File(io.BytesIO(f.content), filename=f.name, description=f.description[:1000] or None)
            for f in files]


def batches(files: Sequence[File], size: int = FILES_PER_MESSAGE) -> list[list[File]]:
    return [list(files[i : i + size]) for i in range(0, len(files), size)]


def colour_of(reply: Reply) -> int:
    if not reply.ok:
        blocks = [b for b in reply.blocks if isinstance(b, Text)]
        return YELLOW if blocks and all(b.style in ("warning", "hint") for b in blocks) else RED
    if any(isinstance(b, Text) and b.style == "warning" for b in reply.blocks):
        return YELLOW
    return BLURPLE


def render_reply(reply: Reply, *, page_chars: int = 3800, file_limit: int = DEFAULT_FILE_LIMIT) -> Rendered:
    """A reply as embed pages plus its files."""
    title = ""
    pieces: list[str | Table] = []
    files: list[File] = []
    image: str | None = None
    for block in reply.blocks:
        if isinstance(block, Text) and block.style == "title" and not title and len(block.text) <= TITLE_CHARS:
            title = block.text
        elif isinstance(block, File | Image):
            attachment = _as_file(block)
            if len(attachment.content) > file_limit:
                pieces.append(f"📎 {attachment.name} ({_size(len(attachment.content))}) is too big to attach here.")
                continue
            files.append(attachment)
            if isinstance(block, Image) and image is None:
                image = block.name
        elif isinstance(block, Table) and _rows_fit(block, page_chars):
            pieces.append(block)
        else:
            text = inline(block)
            if len(text) > page_chars:
                name = f"reply-{len(files) + 1}.txt"
                files.append(File(name, block.fallback().encode(), "the full text"))
                pieces.append(f"📎 The full text is attached as {name}.")
            else:
                pieces.append(text)
    pages = [Page(title, text, colour_of(reply)) for text in _pack(pieces, page_chars)] or [
        Page(title, "", colour_of(reply))
    ]
    pages[0].image = image
    return Rendered(pages, files)


def inline(block: Block) -> str:
    """A block as Discord markdown, whatever its length."""
    if isinstance(block, Text):
        if block.style == "title":
            return f"**{block.text}**"
        return _PREFIX.get(block.style, "") + block.text
    if isinstance(block, Table):
        return table_markdown(block.title, block.columns, block.rows)
    if isinstance(block, Code):
        return f"```{block.language}\n{_fence_safe(block.code)}\n```"
    if isinstance(block, ProgressBlock):
        return progress_line(block.gpu, block.phase, block.done, block.total, block.queue_position)
    return block.fallback()


def table_markdown(title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    body = Table(columns, tuple(rows)).fallback()
    heading = f"**{title}**\n" if title else ""
    return f"{heading}```\n{_fence_safe(body)}\n```"


def progress_line(gpu: str, phase: str, done: int = 0, total: int = 0, position: int | None = None) -> str:
    icon = {"queued": "⏳", "compiling": "🔧", "testing": "🧪", "benchmarking": "⏱️", "profiling": "🔬",
            "done": "✅", "failed": "❌"}.get(phase, "•")
    if phase == "queued":
        where = f", position {position}" if position is not None else ""
        return f"{icon} `{gpu}` queued{where}"
    if total:
        filled = round(10 * done / total)
        return f"{icon} `{gpu}` {phase} {done}/{total} {'▰' * filled}{'▱' * (10 - filled)}"
    return f"{icon} `{gpu}` {phase}"


def detail_messages(blocks: Iterable[Block], *, file_limit: int = DEFAULT_FILE_LIMIT,
                    file_prefix: str = "details") -> list[Detail]:
    """Blocks as plain messages (a thread's): long tables and text as files, never cut."""
    pieces: list[str] = []
    files: list[File] = []
    for block in blocks:
        if isinstance(block, File | Image):
            attachment = _as_file(block)
            if len(attachment.content) > file_limit:
                pieces.append(f"📎 {attachment.name} ({_size(len(attachment.content))}) is too big to attach here.")
            else:
                files.append(attachment)
            continue
        text = inline(block)
        if len(text) <= DETAIL_PIECE_CHARS:
            pieces.append(text)
            continue
        title = block.title if isinstance(block, Table) else ""
        name = f"{file_prefix}-{_slug(title) or len(files) + 1}.txt"
        files.append(File(name, block.fallback().encode(), title or "the full text"))
        pieces.append(f"**{title}**: attached as {name}." if title else f"📎 Attached as {name}.")
    messages = [Detail(text) for text in _pack(pieces, MESSAGE_CHARS)]
    for batch in batches(files):
        if messages and not messages[-1].files:
            messages[-1].files = batch
        else:
            messages.append(Detail("", batch))
    return messages


def _pack(pieces: Sequence[str | Table], limit: int) -> list[str]:
    """Join pieces into texts of at most ``limit`` characters; tables may split between rows."""
    pages: list[str] = []
    current = ""
    for piece in pieces:
        for part in _table_parts(piece, limit) if isinstance(piece, Table) else [piece]:
            joined = f"{current}\n{part}" if current else part
            if len(joined) <= limit:
                current = joined
            else:
                if current:
                    pages.append(current)
                current = part
    if current:
        pages.append(current)
    return pages


def _table_parts(table: Table, limit: int) -> list[str]:
    """The table as code blocks of at most ``limit`` characters, each with the header."""
    parts: list[str] = []
    rows: list[tuple[str, ...]] = []
    for row in table.rows:
        candidate = table_markdown(table.title if not parts else f"{table.title} (continued)", table.columns,
                                   [*rows, row])
        if rows and len(candidate) > limit:
            parts.append(table_markdown(table.title if not parts else f"{table.title} (continued)",
                                        table.columns, rows))
            rows = []
        rows.append(row)
    parts.append(table_markdown(table.title if not parts else f"{table.title} (continued)", table.columns, rows))
    return parts


def _rows_fit(table: Table, limit: int) -> bool:
    """Whether every row fits on a page with the header; a table that does not becomes a file."""
    sizes = [len(table_markdown(table.title, table.columns, [row])) for row in table.rows]
    return max(sizes, default=len(table_markdown(table.title, table.columns, []))) <= limit


def _as_file(block: File | Image) -> File:
    return block if isinstance(block, File) else File(block.name, block.png, block.alt)


def _fence_safe(text: str) -> str:
    return text.replace("```", "`\u200b``")


def _slug(text: str) -> str:
    return "-".join("".join(c if c.isalnum() else " " for c in text.lower()).split())[:60]


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.0f} KiB"
