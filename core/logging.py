"""structlog set-up: readable on a terminal, JSON lines otherwise (production, CI, files).

Every line of a submission carries its id: the pipeline binds ``submission_id`` and ``job_id``
as context variables around a job, and ``merge_contextvars`` adds them to each line.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import structlog


def configure_logging(level: str = "INFO", fmt: str = "auto", stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    json_lines = fmt == "json" or (fmt == "auto" and not stream.isatty())
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if json_lines else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    route_library_logs()


# Libraries that log through the standard library, each with the lowest level of theirs that
# reaches our log. APScheduler's INFO lines ("Added job", "Job executed successfully") narrate
# every scheduled job; its warnings (a missed run) and errors (a job that raised) are kept.
LIBRARY_LEVELS = {"apscheduler": logging.WARNING}


class StructlogHandler(logging.Handler):
    """Hands a standard-library record to structlog, so it is one line in the same format
    (JSON or console) and stream as every other, never a raw line from Python's last-resort
    handler."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            event = record.getMessage()
        except Exception:  # a record whose arguments do not fit its message
            event = str(record.msg)
        fields: dict[str, Any] = {"logger": record.name}
        if record.exc_info:
            fields["exc_info"] = record.exc_info
        structlog.get_logger(record.name).log(record.levelno, event, **fields)


def route_library_logs() -> None:
    for name, level in LIBRARY_LEVELS.items():
        library = logging.getLogger(name)
        library.setLevel(level)
        library.propagate = False
        if not any(isinstance(h, StructlogHandler) for h in library.handlers):
            library.addHandler(StructlogHandler())


class Throttle:
    """At most one line per ``every_s`` for a kind of event that can come in floods (a failed
    accept per connection attempt, a refused connection): the line that goes out counts the
    ones held back, so a flood costs a few lines, not a traceback each."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every_s, self._clock = every_s, clock
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def allow(self, key: str) -> int | None:
        """None to stay quiet; else how many of ``key`` were held back since the last line."""
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self.every_s:
            self._held[key] = self._held.get(key, 0) + 1
            return None
        self._last[key] = now
        return self._held.pop(key, 0)


class ThrottledRecords(logging.Filter):
    """A stdlib logging filter (uvicorn's own lines) that lets one record per message through
    every ``every_s``, the count of held-back ones added to it."""

    def __init__(self, every_s: float = 10.0) -> None:
        super().__init__()
        self.throttle = Throttle(every_s)

    def filter(self, record: logging.LogRecord) -> bool:
        held = self.throttle.allow(str(record.msg))
        if held is None:
            return False
        if held:
            record.msg = f"{record.msg} ({held} more like it held back)"
        return True


ACCEPT_ERRORS = "socket.accept() out of system resource"


def throttle_accept_errors(loop: asyncio.AbstractEventLoop, every_s: float = 10.0) -> None:
    """asyncio reports each failed accept (out of descriptors, EMFILE) with a full traceback; a
    flood of connections then writes hundreds of MB of log. Report them as one structured line
    per ``every_s`` with a count; every other loop error goes to the handler there was."""
    previous = loop.get_exception_handler()
    if getattr(previous, "throttles_accepts", False):
        return  # installed already (serve does it for every adapter, the web adapter for itself)
    log = structlog.get_logger("kernelcup.server")
    throttle = Throttle(every_s)

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", ""))
        exception = context.get("exception")
        if message.startswith(ACCEPT_ERRORS) or "_accept_connection" in repr(context.get("handle")):
            held = throttle.allow("accept")
            if held is not None:
                log.error("cannot accept connections", error=repr(exception), held_back=held,
                          hint="too many open connections or files: raise the descriptor limit "
                               "(ulimit -n) or lower web.max_connections")
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handle.throttles_accepts = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handle)
