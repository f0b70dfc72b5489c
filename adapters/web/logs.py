"""A submission's logs over HTTP, without one reader starving the others.

A run's logs come to megabytes (the harness keeps 1 MiB of each stream, and profiles). The JSON
and the pages carry the first ``LOG_SHOWN_CHARS`` of each with a link to the whole log, which is
streamed in chunks from one copy shared by every reader. Each run's result is parsed once and
kept while it is read (``cache_bytes`` in all, the runs read last). Every read of a submission's
results or logs passes one gate (``LogGate``), a few at a time, from before anything of it runs
(its token's look-up too) until its answer is made: a flood of them waits there, holding next to
nothing, instead of in the worker threads every request shares. The answers are small (the JSON,
a page) or a shared copy (a whole log), so a reader who is slow to take one holds no gate and
little memory; the report, whole as chat gets it, is the exception: a reader slow to take it
holds its megabytes until it is taken.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Annotated

from fastapi import Depends
from fastapi import Request as HttpRequest

from kernelcup.harness.spec import Result, SpecError

LOG_SHOWN_CHARS = 16 * 1024
CHUNK_BYTES = 64 * 1024
# A stored run never changes, but SQLite may give a deleted run's id to a new one: the time it
# was made tells them apart.
RunKey = tuple[int, datetime]


@dataclass(frozen=True)
class RunLogs:
    """One run's result with each log cut to what the JSON and the pages show, and every log whole."""

    result: Result
    whole: dict[str, bytes]  # "stdout", "stderr", "compile" and the result's files, UTF-8

    @property
    def size(self) -> int:
        return sum(len(text) for text in self.whole.values()) + len(self.whole) * LOG_SHOWN_CHARS


def logs_of(result: Result) -> dict[str, str]:
    """Every log of a result by the name its URL takes; empty ones left out."""
    logs = {"stdout": result.stdout, "stderr": result.stderr, "compile": result.compile_log, **result.files}
    return {name: text for name, text in logs.items() if text.strip()}


def cut(text: str) -> str:
    if len(text) <= LOG_SHOWN_CHARS:
        return text
    rest = len(text) - LOG_SHOWN_CHARS
    return text[:LOG_SHOWN_CHARS] + f"\n[… {rest:,} more characters: the whole log is at its link]"


def run_logs(result: Result) -> RunLogs:
    whole = {name: text.encode() for name, text in logs_of(result).items()}
    shown = replace(result, stdout=cut(result.stdout), stderr=cut(result.stderr),
                    compile_log=cut(result.compile_log), files={k: cut(v) for k, v in result.files.items()})
    return RunLogs(shown, whole)


def chunks(body: bytes) -> Iterator[bytes]:
    """A whole log in pieces: a reader who is slow holds one piece in the server's buffers, not the log."""
    view = memoryview(body)
    for start in range(0, len(body), CHUNK_BYTES):
        yield bytes(view[start:start + CHUNK_BYTES])


class LogReads:
    """The gate and the cache of parsed results, one per web app."""

    def __init__(self, at_once: int = 4, cache_bytes: int = 64 << 20) -> None:
        self.gate = asyncio.Semaphore(at_once)
        self._cache_bytes = cache_bytes
        self._runs: OrderedDict[RunKey, RunLogs] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()  # the cache is used from worker threads

    def of_run(self, run: RunKey, load: Callable[[], str]) -> RunLogs | None:
        """The run's result and logs, parsed from ``load()`` (its stored JSON) the first time;
        None when that does not read as a result."""
        with self._lock:
            kept = self._runs.get(run)
            if kept is not None:
                self._runs.move_to_end(run)
                return kept
        try:
            logs = run_logs(Result.from_json(load()))
        except (SpecError, json.JSONDecodeError):
            return None
        if logs.size <= self._cache_bytes:
            with self._lock:
                if run not in self._runs:
                    self._runs[run] = logs
                    self._held += logs.size
                while self._held > self._cache_bytes:
                    _, dropped = self._runs.popitem(last=False)
                    self._held -= dropped.size
        return logs


def log_reads(request: HttpRequest) -> LogReads:
    reads: LogReads = request.app.state.log_reads
    return reads


async def _through_the_gate(request: HttpRequest) -> AsyncIterator[None]:
    async with log_reads(request).gate:
        yield


# The first parameter of every route that reads a submission's results or logs: FastAPI solves a
# route's dependencies in order, so the gate is taken before the others run; it is let go when
# the route has made its answer ("function" scope), so a reader who never reads it holds no slot.
LogGate = Annotated[None, Depends(_through_the_gate, scope="function")]
Reads = Annotated[LogReads, Depends(log_reads)]
