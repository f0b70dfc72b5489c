"""The work an adapter does after it has acknowledged a request (Slack's 3 s ack, GitHub's webhook
answer): each piece a task kept referenced (a bare task can be garbage-collected), logged when it
fails, waited on by ``idle`` and cancelled by ``end`` when the adapter stops."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import structlog

log = structlog.get_logger()

Spawn = Callable[[Coroutine[Any, Any, None]], None]


class Resumable(Protocol):
    async def resume(self, spawn: Spawn) -> int: ...


class Background:
    """``refusal(error)`` names an error that is the platform saying no (an expired trigger, a
    permission it lacks): a warning with those fields, not a failure with a traceback."""

    def __init__(self, platform: str, refusal: Callable[[BaseException], dict[str, Any] | None]) -> None:
        self.platform = platform
        self._refusal = refusal
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def resume(self, conversation: Resumable) -> None:
        """Follow again the submissions this platform still owes a report (the bot stopped while
        they ran), in the background."""
        self.spawn(self._resume(conversation))

    async def idle(self) -> None:
        """Until every piece of work has ended (tests and a graceful stop wait on it)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def end(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _resume(self, conversation: Resumable) -> None:
        try:
            await conversation.resume(self.spawn)
        except Exception:
            log.exception("could not follow the unfinished submissions again", platform=self.platform)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        assert error is not None
        refused = self._refusal(error)
        if refused is not None:
            log.warning(f"{self.platform} refused a call", **refused)
        else:
            log.error(f"{self.platform} task failed", exc_info=error)
