"""The cards of this machine, as the local runner hands them to jobs.

A single-GPU job takes one card; a multi-GPU job takes every card of the machine, so no other
job shares its interconnect or its host while it is timed. Jobs take cards in the order they
asked (first come, first served): a multi-GPU job waiting for the machine is not passed by
single-GPU jobs that keep arriving, and a single-GPU job waits while a multi-GPU one runs.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections import deque


class CardPool:
    def __init__(self, count: int, visible: str | None = None) -> None:
        """``count`` cards; ``visible``: the operator's own CUDA_VISIBLE_DEVICES, whose entries
        are the cards' names (default: 0 .. count - 1)."""
        given = [part.strip() for part in (visible or "").split(",") if part.strip()]
        self.names = given[:count] if len(given) >= count else [str(i) for i in range(count)]
        self._free = list(range(count))
        self._waiting: deque[int] = deque()
        self._tickets = itertools.count()
        self._changed = asyncio.Condition()

    @classmethod
    def for_machine(cls, count: int) -> CardPool:
        return cls(count, os.environ.get("CUDA_VISIBLE_DEVICES"))

    @property
    def count(self) -> int:
        return len(self.names)

    @property
    def free(self) -> int:
        return len(self._free)

    async def take(self, whole_machine: bool) -> list[int]:
        """One card, or (``whole_machine``) every card; waits its turn."""
        wanted = self.count if whole_machine else 1
        ticket = next(self._tickets)
        async with self._changed:
            self._waiting.append(ticket)
            try:
                await self._changed.wait_for(lambda: self._waiting[0] == ticket and len(self._free) >= wanted)
            except BaseException:
                self._waiting.remove(ticket)
                self._changed.notify_all()
                raise
            self._waiting.popleft()
            taken, self._free = self._free[:wanted], self._free[wanted:]
            self._changed.notify_all()
            return taken

    async def give_back(self, cards: list[int]) -> None:
        async with self._changed:
            self._free = sorted(self._free + cards)
            self._changed.notify_all()

    def visible_devices(self, cards: list[int]) -> str:
        """CUDA_VISIBLE_DEVICES for a job on ``cards``: rank r runs on the r-th of them."""
        return ",".join(self.names[card] for card in cards)
