"""A submission's check run and comment, edited together while it runs.

Edits are throttled (GitHub limits how fast one token may write); the newest state wins and the
final one is always sent last, after any edit already on its way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import suppress

import structlog

from kernelcup.adapters.github.api import GitHubApi, GitHubApiError, Output
from kernelcup.adapters.github.markdown import render
from kernelcup.adapters.github.origin import Origin
from kernelcup.core.messages import Block, ProgressBlock

log = structlog.get_logger("kernelcup.github")


def marker(key: str) -> str:
    """A comment's hidden key: the adapter finds its own comment for a file again by it."""
    return f"<!-- kernelcup:{key} -->"


class LiveReply:
    def __init__(self, api: GitHubApi, origin: Origin, interval_s: float, max_log_chars: int) -> None:
        self.api = api
        self.origin = origin
        self.interval_s = interval_s
        self.max_log_chars = max_log_chars
        self._latest: list[Block] | None = None
        self._dirty = asyncio.Event()
        self._closing = asyncio.Event()
        self._task = asyncio.create_task(self._pump())

    def show(self, blocks: list[Block]) -> None:
        """The newest progress; it reaches GitHub within ``interval_s``, replacing older ones."""
        self._latest = blocks
        self._dirty.set()

    async def finish(self, output: Output, conclusion: str, blocks: list[Block]) -> None:
        """Stop the progress edits (one on its way ends first), then write the outcome."""
        self._closing.set()
        self._dirty.set()
        with suppress(asyncio.CancelledError):
            await self._task
        await self._write(self.api.update_check(self.origin.repo, self.origin.check_id, output,
                                                conclusion=conclusion))
        await self._write(self.api.update_comment(self.origin.repo, self.origin.comment_id, self.body(blocks)))

    async def close(self) -> None:
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task

    def body(self, blocks: list[Block]) -> str:
        return marker(self.origin.key) + "\n" + render(blocks, max_log_chars=self.max_log_chars)

    async def _pump(self) -> None:
        while not self._closing.is_set():
            await self._dirty.wait()
            self._dirty.clear()
            if self._closing.is_set() or self._latest is None:
                return
            await self._push(self._latest)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), self.interval_s)

    async def _push(self, blocks: list[Block]) -> None:
        lines = [b for b in blocks if isinstance(b, ProgressBlock)]
        title = "; ".join(line.fallback() for line in lines) or "running"
        output = Output(title=title, summary=render(blocks, max_log_chars=self.max_log_chars))
        await self._write(self.api.update_check(self.origin.repo, self.origin.check_id, output))
        await self._write(self.api.update_comment(self.origin.repo, self.origin.comment_id, self.body(blocks)))

    @staticmethod
    async def _write(call: Awaitable[None]) -> None:
        try:
            await call
        except GitHubApiError as exc:  # one failed edit must not end the conversation
            log.warning("GitHub refused an edit", error=str(exc), status=exc.status)
