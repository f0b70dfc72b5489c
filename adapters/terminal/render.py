"""Rendering neutral reply blocks in a terminal with Rich. Files are saved, never cut; Markdown
(a leaderboard's description) is drawn with Rich's own renderer: headings, lists and code."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console, RenderableType
from rich.markdown import Markdown
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table as RichTable
from rich.text import Text as RichText

from kernelcup.core.messages import Block, Code, File, Image, ProgressBlock, Reply, Table, Text

_STYLES = {
    "plain": "",
    "title": "bold",
    "success": "green",
    "error": "bold red",
    "warning": "yellow",
    "hint": "dim",
}
INLINE_FILE_CHARS = 4000


class TerminalRenderer:
    def __init__(self, console: Console, files_dir: Path) -> None:
        self.console = console
        self.files_dir = files_dir

    def reply(self, reply: Reply) -> None:
        for block in reply.blocks:
            self.console.print(self.block(block))

    def fail(self, message: str, hint: str = "", kind: str = "unavailable") -> None:
        """A failure before any reply (no file, no server): one line on stderr."""
        Console(stderr=True).print(f"[red]{escape(message)}[/red] {escape(hint)}".rstrip(), highlight=False)

    def block(self, block: Block) -> RenderableType:
        if isinstance(block, Text) and block.style == "markdown":
            return Markdown(block.text)
        if isinstance(block, Text):
            return RichText(block.text, style=_STYLES.get(block.style, ""))
        if isinstance(block, Table):
            table = RichTable(title=block.title or None, title_justify="left", show_lines=False)
            for column in block.columns:
                table.add_column(column, overflow="fold")
            for row in block.rows:
                table.add_row(*row)
            return table
        if isinstance(block, Code):
            return Syntax(block.code, block.language or "text", word_wrap=True)
        if isinstance(block, File):
            return self._file(block)
        if isinstance(block, Image):
            return RichText(f"{block.alt} (saved to {self._save(block.name, block.png)})", style="dim")
        if isinstance(block, ProgressBlock):
            return RichText(block.fallback(), style="cyan")
        raise TypeError(f"the terminal cannot render {type(block).__name__}")

    def _file(self, block: File) -> RenderableType:
        path = self._save(block.name, block.content)
        try:
            text = block.content.decode("utf-8")
        except UnicodeDecodeError:
            return RichText(f"{block.description or block.name}: saved to {path}", style="dim")
        if len(text) > INLINE_FILE_CHARS:
            return RichText(f"{block.description or block.name}: {len(text)} characters, saved to {path}",
                            style="dim")
        lexer = "python" if block.name.endswith(".py") else "cuda" if block.name.endswith((".cu", ".cuh")) else "text"
        return Panel(Syntax(text, lexer, word_wrap=True), title=f"{block.name} (saved to {path})",
                     title_align="left")

    def _save(self, name: str, content: bytes) -> Path:
        self.files_dir.mkdir(parents=True, exist_ok=True)
        path = self.files_dir / Path(name).name
        path.write_bytes(content)
        return path
