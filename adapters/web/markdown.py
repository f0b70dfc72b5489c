"""Just enough Markdown for leaderboard descriptions: paragraphs, lists, headings, ``code``,
**bold** and http(s) links. Everything is escaped first, so a description cannot inject HTML."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")


def _inline(text: str) -> str:
    html = str(escape(text))
    html = _CODE.sub(r"<code>\1</code>", html)
    html = _BOLD.sub(r"<strong>\1</strong>", html)
    return _LINK.sub(r'<a href="\2" rel="nofollow noopener">\1</a>', html)


def render(text: str) -> Markup:
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        lines = block.splitlines()
        if not lines:
            continue
        heading = re.match(r"^(#{1,4})\s+(.*)$", lines[0])
        if heading and len(lines) == 1:
            level = min(len(heading.group(1)) + 2, 6)
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            continue
        paragraph: list[str] = []
        items: list[str] = []
        for line in lines:
            item = re.match(r"^\s*[-*]\s+(.*)$", line)
            if item:
                items.append(item.group(1))
            elif items and line.startswith((" ", "\t")):
                items[-1] += " " + line.strip()  # a list item's continuation line
            else:
                paragraph.append(line.strip())
        if paragraph:
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
        if items:
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
    return Markup("\n".join(out))
