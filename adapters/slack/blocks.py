"""Neutral reply blocks as Slack Block Kit, and the messages only Slack needs (live progress,
the GPU menu, help's Slack hint).

Slack caps a section at 3,000 characters and a message at 50 blocks; whatever would not fit
becomes a file in the message's thread, never a cut message.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kernelcup.core.messages import Block, Code, File, Image, ProgressBlock, Reply, Table, Text
from kernelcup.core.pipeline.events import JobEvent

SlackBlock = dict[str, Any]
MAX_BLOCKS = 50
SECTION_CHARS = 3000
NOTIFICATION_CHARS = 300
GPU_CHOICE_ACTION = "kernelcup_gpu_choice"
GPU_SUBMIT_ACTION = "kernelcup_gpu_submit"
_PREFIX = {"error": ":x: ", "warning": ":warning: "}


@dataclass(frozen=True)
class SlackFile:
    name: str
    content: bytes
    title: str


@dataclass
class SlackMessage:
    """What one chat.postMessage / chat.update carries, plus the files for its thread."""

    text: str  # notifications and clients without Block Kit
    blocks: list[SlackBlock] = field(default_factory=list)
    files: list[SlackFile] = field(default_factory=list)


def escape(text: str) -> str:
    """Slack's three control characters; everything else in mrkdwn is the user's formatting."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def section(text: str) -> SlackBlock:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(text: str) -> SlackBlock:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def render(
    reply: Reply, *, max_chars: int = 1800, tables_as_files: bool = False, file_prefix: str = ""
) -> SlackMessage:
    """Every block of a reply; long text, tables (when asked) and files go to the thread."""
    limit = min(max_chars, SECTION_CHARS - 10)
    message = SlackMessage(text=notification(reply.blocks))
    for block in reply.blocks:
        as_file = _as_file(block, limit, tables_as_files, file_prefix)
        if as_file is not None:
            message.files.append(as_file)
            continue
        message.blocks.append(_slack_block(block))
    if len(message.blocks) > MAX_BLOCKS:  # rare: keep the head, the whole reply goes to the thread
        message.blocks = [*message.blocks[: MAX_BLOCKS - 1], context("The full reply is in the thread.")]
        message.files.insert(0, SlackFile(f"{file_prefix}reply.txt", reply.text().encode(), "the full reply"))
    if message.files and not message.blocks:
        message.blocks.append(context(f"{len(message.files)} file(s) in the thread."))
    return message


def notification(blocks: Iterable[Block]) -> str:
    for block in blocks:
        if isinstance(block, Text):
            return block.text[:NOTIFICATION_CHARS]
    return "kernelcup"


def _as_file(block: Block, limit: int, tables_as_files: bool, prefix: str) -> SlackFile | None:
    if isinstance(block, File):
        return SlackFile(block.name, block.content, block.description or block.name)
    if isinstance(block, Image):
        return SlackFile(block.name, block.png, block.alt)
    if isinstance(block, Table) and (tables_as_files or len(block.fallback()) > limit):
        name = slug(block.title or "table")
        return SlackFile(f"{prefix}{name}.txt", block.fallback().encode(), block.title or "table")
    if isinstance(block, Code) and len(block.code) > limit:
        extension = {"python": "py", "cuda": "cu", "cpp": "cpp"}.get(block.language, "txt")
        return SlackFile(f"{prefix}code.{extension}", block.code.encode(), "code")
    if isinstance(block, Text) and len(block.text) > limit:
        return SlackFile(f"{prefix}message.txt", block.text.encode(), block.text[:60])
    return None


def _slack_block(block: Block) -> SlackBlock:
    if isinstance(block, Text):
        text = escape(block.text)
        if block.style == "title":
            return section(f"*{text}*")
        if block.style == "hint":
            return context(text)
        if block.style in _PREFIX and "❌" not in text:
            return section(_PREFIX[block.style] + text)
        return section(text)
    if isinstance(block, Table | Code):
        title = f"*{escape(block.title)}*\n" if isinstance(block, Table) and block.title else ""
        body = block.fallback() if isinstance(block, Code) else _table_body(block)
        return section(f"{title}```{escape(body)}```")
    if isinstance(block, ProgressBlock):
        return context(escape(progress_text(block)))
    raise TypeError(f"Slack cannot render {type(block).__name__}")  # File and Image went to the thread


def _table_body(table: Table) -> str:
    """Without the title (shown in bold above) and the padding Slack would wrap on a phone."""
    return "\n".join(line.rstrip() for line in Table(table.columns, table.rows).fallback().splitlines())


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "file"


def progress_text(block: ProgressBlock) -> str:
    bar = ""
    if block.total and block.phase not in ("done", "failed"):
        filled = round(10 * block.done / block.total)
        bar = " " + "▰" * filled + "▱" * (10 - filled)
    return block.fallback() + bar


def progress_blocks(submission_id: int, intro: list[Block], events: Mapping[int, JobEvent]) -> SlackMessage:
    """The live message: what the core said on accepting, then one line per job."""
    message = render(Reply([b for b in intro if not isinstance(b, ProgressBlock)]))
    for event in events.values():
        phase = (event.status or event.phase) if event.finished else event.phase
        line = ProgressBlock(event.job_id, event.gpu, phase, event.done, event.total, event.queue_position)
        message.blocks.append(context(escape(progress_text(line))))
    message.text = f"Submission #{submission_id}: running"
    return message


def gpu_choice_message(reply: Reply, options: list[str], token: str) -> SlackMessage:
    """The core could not pick GPUs by itself: a menu, and a button that sends the choice."""
    message = render(Reply([b for b in reply.blocks if not (isinstance(b, Text) and b.style == "hint")]))
    message.blocks.append(
        {
            "type": "actions",
            "block_id": f"gpu_choice:{token}",
            "elements": [
                {
                    "type": "multi_static_select",
                    "action_id": GPU_CHOICE_ACTION,
                    "placeholder": {"type": "plain_text", "text": "GPUs"},
                    "options": [_option(gpu) for gpu in options],
                },
                {
                    "type": "button",
                    "action_id": GPU_SUBMIT_ACTION,
                    "text": {"type": "plain_text", "text": "Submit"},
                    "style": "primary",
                    "value": token,
                },
            ],
        }
    )
    return message


def _option(value: str) -> SlackBlock:
    return {"text": {"type": "plain_text", "text": value[:75]}, "value": value}


def options(values: Iterable[str]) -> list[SlackBlock]:
    return [_option(v) for v in values]


SLACK_HELP = (
    "To submit, run `{command} submit` for a form, or share your file with me (in a DM, or in a channel "
    "mentioning me) with `submit ranked <leaderboard> --gpu <GPU>` or `#!POPCORN` lines as its message."
)


def with_slack_help(reply: Reply, command: str) -> Reply:
    """Help from the core (the registry, filtered by role): its command table as lines of the
    slash command to type, plus how files reach Slack."""
    blocks: list[Block] = []
    for block in reply.blocks:
        if not (isinstance(block, Table) and block.columns[:1] == ("command",)):
            blocks.append(block)
            continue
        by_group: dict[str, list[str]] = {}
        for name, group, *what in block.rows:
            by_group.setdefault(group, []).append(f"`{command} {name}` {' '.join(what)}")
        for group in sorted(by_group, key=lambda g: g != "leaderboard"):
            title = "Commands" if group == "leaderboard" else f"{group.capitalize()} commands"
            blocks.append(Text(f"*{title}*\n" + "\n".join(by_group[group])))
    blocks.append(Text(SLACK_HELP.format(command=command), style="hint"))
    reply.blocks = blocks
    return reply
