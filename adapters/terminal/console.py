"""The console adapter: a chat in the terminal where you type the same slash commands people
type in Discord or Slack, through exactly the same Request/Reply path. It is the embedded
default of ``kernelcup serve`` and the model for the chat adapters."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping
from typing import TextIO

from rich.console import Console

from kernelcup.adapters.terminal.follow import describe
from kernelcup.adapters.terminal.render import TerminalRenderer
from kernelcup.adapters.terminal.session import read_local_files, terminal_actor
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import find_command
from kernelcup.core.commands.parsing import parse_line
from kernelcup.core.config import Settings
from kernelcup.core.errors import UserError
from kernelcup.core.messages import Reply, Request

PROMPT = "kernelcup> "


class ConsoleAdapter:
    name = "console"
    platform = "console"

    @classmethod
    def configured(cls, env: Mapping[str, str]) -> bool:
        return True  # needs nothing; serve runs it when no chat adapter is configured

    def __init__(self, settings: Settings, env: Mapping[str, str], *, stdin: TextIO | None = None,
                 console: Console | None = None) -> None:
        self.stdin = stdin or sys.stdin
        self.console = console or Console(highlight=False)
        self.renderer = TerminalRenderer(self.console, settings.leaderboards_dir.parent / "var" / "files")
        self.actor = terminal_actor()
        self._following: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()

    async def run(self, app: Kernelcup) -> None:
        app.announcements.register(self)
        self.console.print("[bold]kernelcup console[/bold]: type /leaderboard help, or /leaderboard list. "
                           "Ctrl-D quits.")
        while not self._stopped.is_set():
            line = await asyncio.to_thread(self._read_line)
            if line is None:
                break
            if line.strip():
                await self.handle_line(app, line.strip())
        if self._following:  # let submissions typed before end of input finish
            await asyncio.gather(*self._following, return_exceptions=True)

    async def stop(self) -> None:
        self._stopped.set()

    async def announce(self, channel: str, reply: Reply) -> None:
        self.console.rule(f"announcement ({channel})")
        self.renderer.reply(reply)

    async def handle_line(self, app: Kernelcup, line: str) -> None:
        try:
            name, args = parse_line(line)
            attachments = read_local_files(find_command(name), args)
        except UserError as exc:
            self.renderer.reply(Reply.error(exc.message, exc.hint))
            return
        reply = await app.handle(Request(actor=self.actor, command=name, args=args, attachments=attachments,
                                         reply_to="console", from_this_machine=True))
        self.renderer.reply(reply)
        if reply.submission_id is not None:
            task = asyncio.create_task(self._follow(app, reply.submission_id))
            self._following.add(task)
            task.add_done_callback(self._following.discard)

    async def _follow(self, app: Kernelcup, submission_id: int) -> None:
        last: dict[int, str] = {}
        async for event in app.follow(submission_id):
            text = describe(event) + (f" {event.done}/{event.total}" if event.total and not event.finished else "")
            if last.get(event.job_id) != text:
                last[event.job_id] = text
                self.console.print(f"#{submission_id} {text}", style="cyan")
        self.renderer.reply(await app.submission_report(submission_id))

    def _read_line(self) -> str | None:
        if self.stdin.isatty():
            try:
                return input(PROMPT)
            except EOFError:
                return None
        line = self.stdin.readline()
        return line if line else None
