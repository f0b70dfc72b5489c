"""How the web server treats connections, so that one client cannot starve the others.

uvicorn's h11 protocol closes a keep-alive connection left idle after a response
(``timeout_keep_alive``) and answers 503 past ``limit_concurrency``, but it sets no deadline for
a connection that never finishes its request headers, nor for a body that stops arriving, and it
accepts connections until the process runs out of descriptors: ~20,000 idle sockets then stopped
every web and Slack answer. ``GuardedProtocol`` adds the two deadlines and a cap on open
connections that closes the oldest connection still owing its headers to make room, so a flood
of idle sockets cannot lock out a client that asks something.
"""

from __future__ import annotations

import asyncio
import resource
from dataclasses import dataclass
from typing import ClassVar, cast

import h11
import structlog
from uvicorn.protocols.http.h11_impl import H11Protocol

from kernelcup.core.logging import Throttle

log = structlog.get_logger("kernelcup.web")
RESERVED_DESCRIPTORS = 512  # database connections, harness pipes, log files, the listening sockets


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int


class ConnectionGuard:
    """What the connections of one server share: the limits, and the connections that still owe
    their request headers, oldest first (the ones a new connection may push out)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.waiting: dict[GuardedProtocol, None] = {}
        self.closed_idle = 0  # for tests and the benchmark: closed by a deadline or pushed out
        self.refused = 0
        self._throttle = Throttle()

    def make_room(self, newcomer: GuardedProtocol) -> bool:
        """Close the oldest connection that owes its headers; False when every one is busy."""
        for oldest in self.waiting:
            if oldest is not newcomer:
                oldest.close_idle()
                self._note("web: connection cap reached; closed the oldest idle connection")
                return True
        self.refused += 1
        self._note("web: connection cap reached and every connection is busy; refused a new one")
        return False

    def _note(self, message: str) -> None:
        held = self._throttle.allow(message)
        if held is not None:
            log.warning(message, max_connections=self.limits.max_connections, held_back=held)


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline, a body idle deadline and the cap."""

    guard: ClassVar[ConnectionGuard]
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.guard.limits.max_connections and not self.guard.make_room(self):
            transport.abort()
            return
        self._owe_headers()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if self.transport.is_closing():
            self._settle()
        elif state is h11.IDLE:
            # Bytes of a request line, or of the next request on a kept-alive connection: the
            # deadline runs from the first of them and is not pushed back by each new byte.
            if self._deadline is None:
                self._owe_headers()
        elif state is h11.SEND_BODY:
            self.guard.waiting.pop(self, None)
            self._arm(self.guard.limits.body_timeout_s)  # each chunk of body restarts it
        else:
            self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.guard.waiting[self] = None  # idle until its next request: may be pushed out

    def connection_lost(self, exc: Exception | None) -> None:
        self._settle()
        super().connection_lost(exc)

    def close_idle(self) -> None:
        self._settle()
        self.guard.closed_idle += 1
        if not self.transport.is_closing():
            self.transport.close()

    def _owe_headers(self) -> None:
        self.guard.waiting[self] = None
        self._arm(self.guard.limits.header_timeout_s)

    def _arm(self, seconds: float) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        self._deadline = self.loop.call_later(seconds, self.close_idle)

    def _settle(self) -> None:
        """Headers and body are in (or the connection is going): no deadline of ours applies."""
        self.guard.waiting.pop(self, None)
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None


def guarded_protocol(guard: ConnectionGuard) -> type[GuardedProtocol]:
    """A protocol class bound to one server's guard (uvicorn builds one instance per connection)."""
    return cast(type[GuardedProtocol], type("GuardedProtocol", (GuardedProtocol,), {"guard": guard}))


def raise_descriptor_limit() -> int:
    """Raise this process's open-file limit to its hard limit; the soft limit now in force.

    Every open connection holds a descriptor: the usual soft limit of 1,024 would let a few
    hundred idle sockets stop the bot."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


def connection_cap(configured: int, descriptors: int) -> int:
    """The connections allowed at once: the configured cap, kept below the descriptor limit so an
    accept never fails for want of one."""
    return max(16, min(configured, descriptors - RESERVED_DESCRIPTORS))
