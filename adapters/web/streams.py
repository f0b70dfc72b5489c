"""Live event streams (server-sent events), shared and capped.

Each submission that someone watches has one follower (``Kernelcup.follow``: the bus, and a read
of the job rows when the bus is quiet), and every stream open on it is fed from that one: 2,000
streams on one submission are one poll of the database, not 2,000. Streams are capped in total
and per client address, and an extra one is refused before it starts, with a message.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable

import structlog

from kernelcup.adapters.web.auth import ApiError
from kernelcup.core.pipeline.events import JobEvent

log = structlog.get_logger("kernelcup.web")
QUEUE_SIZE = 256  # events a slow stream may fall behind by; the oldest go first, never the last
POLL_HINT = "Poll GET /api/submissions/{id} instead (it has the same fields), or try again in a minute."


class Stream:
    """One open stream: the events of its submission, from the state when it opened on."""

    def __init__(self, submission_id: int, client: str) -> None:
        self.submission_id, self.client = submission_id, client
        self._events: deque[JobEvent] = deque(maxlen=QUEUE_SIZE)
        self._ready = asyncio.Event()
        self._ended = False

    def offer(self, event: JobEvent) -> None:
        self._events.append(event)
        self._ready.set()

    def end(self) -> None:
        self._ended = True
        self._ready.set()

    async def events(self) -> AsyncIterator[JobEvent]:
        """Until every job of the submission has finished (or the follower stopped)."""
        while True:
            while self._events:
                yield self._events.popleft()
            if self._ended:
                return
            self._ready.clear()
            await self._ready.wait()


class _Broadcast:
    """The one follower of a submission and the streams it feeds."""

    def __init__(self, submission_id: int) -> None:
        self.submission_id = submission_id
        self.last: dict[int, JobEvent] = {}  # each job's latest event: what a new stream starts from
        self.streams: set[Stream] = set()
        self.task: asyncio.Task[None] | None = None


class EventStreams:
    def __init__(self, follow: Callable[[int], AsyncIterator[JobEvent]], max_total: int, max_per_client: int) -> None:
        self._follow = follow
        self.max_total, self.max_per_client = max_total, max_per_client
        self._broadcasts: dict[int, _Broadcast] = {}
        self._per_client: Counter[str] = Counter()
        self.open_count = 0
        self.followers_started = 0

    def open(self, submission_id: int, client: str) -> Stream:
        """A new stream, or a clear refusal: 429 past the client's cap, 503 past the total."""
        if self._per_client[client] >= self.max_per_client:
            raise ApiError(429, f"You already have {self.max_per_client} live event streams open, the most one "
                                "client may.", "Close one (each page that follows a running submission holds one). "
                           + POLL_HINT, "rate_limited", {"Retry-After": "10"})
        if self.open_count >= self.max_total:
            raise ApiError(503, f"The server has {self.max_total} live event streams open, all it takes.",
                           POLL_HINT, "busy", {"Retry-After": "30"})
        stream = Stream(submission_id, client)
        self._per_client[client] += 1
        self.open_count += 1
        broadcast = self._broadcasts.get(submission_id)
        if broadcast is None:
            broadcast = self._broadcasts[submission_id] = _Broadcast(submission_id)
            broadcast.task = asyncio.create_task(self._run(broadcast))
            self.followers_started += 1
        for event in broadcast.last.values():
            stream.offer(event)
        broadcast.streams.add(stream)
        return stream

    def close(self, stream: Stream) -> None:
        self.open_count -= 1
        self._per_client[stream.client] -= 1
        if self._per_client[stream.client] <= 0:
            del self._per_client[stream.client]
        broadcast = self._broadcasts.get(stream.submission_id)
        if broadcast is None:
            return
        broadcast.streams.discard(stream)
        if not broadcast.streams and broadcast.task is not None:
            broadcast.task.cancel()  # nobody watches: no more polling for it
            del self._broadcasts[stream.submission_id]

    def followers(self) -> int:
        """Followers running now: one per watched submission."""
        return len(self._broadcasts)

    async def _run(self, broadcast: _Broadcast) -> None:
        try:
            async for event in self._follow(broadcast.submission_id):
                broadcast.last[event.job_id] = event
                for stream in list(broadcast.streams):
                    stream.offer(event)
        except Exception:
            log.exception("web: following a submission failed", submission_id=broadcast.submission_id)
        finally:
            for stream in broadcast.streams:
                stream.end()
            if self._broadcasts.get(broadcast.submission_id) is broadcast:
                del self._broadcasts[broadcast.submission_id]
