"""The core's reply blocks as GitHub Markdown: a PR comment and a check run's output.

Logs and profiles (file blocks) become collapsible ``<details>`` sections, each capped; a whole
body stays under GitHub's 65,536 characters. Pictures cannot be attached through the API, so
an image is its text fallback.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping

from kernelcup.core.messages import Block, Code, File, Image, ProgressBlock, Reply, Table, Text
from kernelcup.core.pipeline.events import JobEvent

MAX_BODY = 60_000  # GitHub refuses a comment or check output above 65,536 characters
_ICONS = ("✅", "❌", "⚠️")


def text_line(block: Text) -> str:
    if block.style == "title":
        return f"### {block.text}"
    if block.style == "error":
        return f"**{block.text}**" if any(icon in block.text for icon in _ICONS) else f"❌ **{block.text}**"
    if block.style == "warning":
        return f"⚠️ {block.text}"
    if block.style == "hint":
        return f"_{block.text}_"
    return block.text


def table(block: Table) -> str:
    def row(cells: Iterable[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + " |"

    lines = [f"**{block.title}**", ""] if block.title else []
    lines += [row(block.columns), "|" + "---|" * len(block.columns)]
    lines += [row(r) for r in block.rows]
    return "\n".join(lines)


def fenced(text: str, language: str = "") -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


def details(block: File, max_chars: int) -> str:
    """A log or profile, collapsed, its tail kept when it is too long (errors come last)."""
    text = block.content.decode("utf-8", errors="replace")
    if len(text) > max_chars:
        text = f"[… {len(text) - max_chars} characters left out]\n" + text[-max_chars:]
    summary = html.escape(block.description or block.name)
    return f"<details><summary>{summary} ({html.escape(block.name)})</summary>\n\n{fenced(text)}\n\n</details>"


def block_markdown(block: Block, max_log_chars: int) -> str:
    if isinstance(block, Text):
        return text_line(block)
    if isinstance(block, Table):
        return table(block)
    if isinstance(block, Code):
        return fenced(block.code, block.language)
    if isinstance(block, File):
        return details(block, max_log_chars)
    if isinstance(block, Image):
        return f"_{block.fallback()}_"
    if isinstance(block, ProgressBlock):
        return f"- ⏳ {block.fallback()}"
    raise TypeError(f"no Markdown for {type(block).__name__}")  # a new block kind must be drawn here


def render(blocks: Iterable[Block], *, max_log_chars: int = 8000) -> str:
    return cap("\n\n".join(block_markdown(block, max_log_chars) for block in blocks))


def cap(body: str) -> str:
    if len(body) <= MAX_BODY:
        return body
    return body[:MAX_BODY] + "\n\n_(cut here: GitHub takes at most 65,536 characters; see the web page or `mine`)_"


def progress(intro: Iterable[Block], events: Mapping[int, JobEvent]) -> list[Block]:
    """What the core said on accepting (minus its queued lines), then one live line per job."""
    blocks: list[Block] = [b for b in intro if not isinstance(b, ProgressBlock)]
    for event in events.values():
        phase = (event.status or event.phase) if event.finished else event.phase
        blocks.append(ProgressBlock(event.job_id, event.gpu, phase, event.done, event.total, event.queue_position))
    return blocks


def summary(reply: Reply) -> tuple[str, str, str]:
    """A finished report as a check run's output: the first job line as the title; verdicts,
    scores and ranks (the text blocks) as the summary; the per-case tables as the text."""
    lines = [b for b in reply.blocks if isinstance(b, Text)]
    jobs = [b for b in lines if b.style in ("success", "error")]
    title = jobs[0].text if jobs else (lines[0].text if lines else "kernelcup")
    tables = [b for b in reply.blocks if isinstance(b, Table)]
    return title[:250], render(lines), render(tables)
