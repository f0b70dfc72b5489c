"""The web server under a flood: 10,000 idle or half-open connections and 2,000 server-sent event
streams held open while a normal client asks for pages; how long its answers take.

The server is kernelcup's own (``WebAdapter``: uvicorn with the guarded protocol) in a separate
process on 127.0.0.1, on a SQLite file with the shipped leaderboards; the streams follow one
queued submission (the runner holds the job before it at a gate), as the attack in issue #16 did.
Streams come from 100 loopback addresses (127.0.0.2-101), 20 each: the per-client cap. The idle
connections stay open for the whole measurement (the server's header timeout is raised to
``--hold`` seconds; with the shipped 10 s they would be closed, tests/web/test_connections.py).

Run: ``.venv/bin/python -m bench.web_load [--idle 10000] [--streams 2000] [--write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import httpx

RESULTS = Path(__file__).with_name("RESULTS-web-load.md")
STREAM_SOURCES = [f"127.0.0.{i}" for i in range(2, 102)]
IDLE_SOURCES = [f"127.0.1.{i}" for i in range(1, 21)]  # spreads the client's ports
PATHS = ("/api/leaderboards", "/", "/leaderboards/identity")


# -- the server (its own process) ------------------------------------------------------------------

async def serve(db_path: str, hold_s: float) -> None:
    from kernelcup.adapters.web.adapter import WebAdapter
    from kernelcup.core.logging import configure_logging
    from kernelcup.core.messages import Attachment, Request
    from kernelcup.core.store.db import make_engine, upgrade
    from tests.web.conftest import ALICE, Clock, ScriptedRunner, build_app, make_settings, solution

    configure_logging(level="WARNING", fmt="json", stream=sys.stderr)  # stdout carries the handshake
    engine = make_engine(f"sqlite:///{db_path}")
    upgrade(engine)
    runner = ScriptedRunner()
    runner.gate = threading.Event()  # never opened: the first job holds the runner's one slot
    app = build_app(engine, runner, Clock(), make_settings(port=0, header_timeout_s=hold_s))
    await app.pipeline.start()
    ids = []
    for _ in range(2):
        reply = await app.handle(Request(actor=ALICE, command="submit", reply_to="web",
                                         args={"mode": "test", "leaderboard": "identity", "gpu": ["cpu"]},
                                         attachments=[Attachment("kernel.py", solution())]))
        assert reply.submission_id is not None, reply.text()
        ids.append(reply.submission_id)
    adapter = WebAdapter(app.settings, {})
    serving = asyncio.create_task(adapter.run(app))
    await asyncio.wait_for(adapter.ready.wait(), 30)
    print(json.dumps({"port": adapter.port, "submission_id": ids[1]}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)  # until told to stop
    assert adapter.guard is not None and adapter.http_app is not None
    print(json.dumps({"closed_idle": adapter.guard.closed_idle, "refused": adapter.guard.refused,
                      "followers_started": adapter.http_app.state.streams.followers_started,
                      "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}), flush=True)
    await adapter.stop()
    await serving
    await app.pipeline.stop(drain_s=0)


# -- the client ------------------------------------------------------------------------------------

@dataclass
class Load:
    streams: list[asyncio.StreamWriter] = field(default_factory=list)
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)
    stream_failures: list[str] = field(default_factory=list)
    idle_failures: list[str] = field(default_factory=list)
    drains: list[asyncio.Task[None]] = field(default_factory=list)


async def open_stream(port: int, source: str, submission_id: int, load: Load) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        writer.write(f"GET /api/submissions/{submission_id}/events HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"event: progress"), 60)
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
        load.stream_failures.append(repr(exc))
        return
    if not head.startswith(b"HTTP/1.1 200"):
        load.stream_failures.append(head.split(b"\r\n", 1)[0].decode())
        return
    load.streams.append(writer)

    async def drain() -> None:
        while await reader.read(65536):
            pass

    load.drains.append(asyncio.create_task(drain()))


async def open_idle(port: int, source: str, half_open: bool, load: Load) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError as exc:
        load.idle_failures.append(repr(exc))
        return
    if half_open:  # a request line and a header, never the blank line that ends them
        writer.write(b"GET / HTTP/1.1\r\nHost: bench\r\n")
    load.idle.append((reader, writer))


async def in_batches(coroutines: list, size: int = 200) -> None:  # type: ignore[type-arg]
    for start in range(0, len(coroutines), size):
        await asyncio.gather(*coroutines[start:start + size])


def timed_requests(url: str, count: int, pause_s: float) -> list[float]:
    """Latency of a normal client: a fresh connection per request, as a new visitor makes."""
    latencies = []
    for i in range(count):
        started = time.perf_counter()
        response = httpx.get(url + PATHS[i % len(PATHS)], timeout=30)
        latencies.append(time.perf_counter() - started)
        assert response.status_code == 200, response.status_code
        time.sleep(pause_s)
    return latencies


def summary(latencies: list[float]) -> str:
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (f"{1000 * statistics.median(ordered):.1f} / {1000 * p95:.1f} / {1000 * ordered[-1]:.1f} ms "
            f"(n = {len(ordered)})")


async def run(args: argparse.Namespace) -> dict[str, object]:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # 12,000 sockets on this side too
    folder = tempfile.mkdtemp(prefix="kc-web-load-")
    server = subprocess.Popen([sys.executable, "-m", "bench.web_load", "--serve", f"{folder}/kernelcup.db",
                               "--hold", str(args.hold)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              stderr=open(f"{folder}/server.log", "w"))  # noqa: SIM115 (lives as long as the server)
    assert server.stdout is not None and server.stdin is not None
    ready = json.loads(await asyncio.to_thread(server.stdout.readline))
    port, submission_id = int(ready["port"]), int(ready["submission_id"])
    url = f"http://127.0.0.1:{port}"
    baseline = await asyncio.to_thread(timed_requests, url, 30, 0.05)

    load = Load()
    started = time.perf_counter()
    streams = [open_stream(port, STREAM_SOURCES[i % len(STREAM_SOURCES)], submission_id, load)
               for i in range(args.streams)]
    await in_batches(streams)
    streams_s = time.perf_counter() - started
    started = time.perf_counter()
    idle = [open_idle(port, IDLE_SOURCES[i % len(IDLE_SOURCES)], i % 2 == 1, load) for i in range(args.idle)]
    await in_batches(idle, 500)
    idle_s = time.perf_counter() - started
    await asyncio.sleep(1)
    under_load = await asyncio.to_thread(timed_requests, url, args.requests, 0.2)
    still_open = sum(1 for reader, _ in load.idle if not reader.at_eof())
    streams_open = sum(1 for task in load.drains if not task.done())

    server.stdin.write("stop\n")
    server.stdin.flush()
    stats = json.loads(await asyncio.to_thread(server.stdout.readline))
    for _, writer in load.idle:
        writer.close()
    for writer in load.streams:
        writer.close()
    for task in load.drains:
        task.cancel()
    server.wait(60)
    return {
        "baseline": summary(baseline), "under_load": summary(under_load), "worst_s": max(under_load),
        "idle_asked": args.idle, "idle_opened": len(load.idle), "idle_open_at_end": still_open,
        "idle_failures": sorted(set(load.idle_failures))[:3], "idle_open_s": idle_s,
        "streams_asked": args.streams, "streams_opened": len(load.streams), "streams_open_at_end": streams_open,
        "stream_failures": sorted(set(load.stream_failures))[:3], "streams_open_s": streams_s,
        "descriptor_limit": hard, **stats,
    }


def report(figures: dict[str, object], args: argparse.Namespace) -> str:
    machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return "\n".join([
        "# Web server under a flood of connections",
        "",
        f"`python -m bench.web_load --idle {args.idle} --streams {args.streams} --write`, {date.today()}, "
        f"2-core dev box ({machine}), shared; server and client are separate processes on 127.0.0.1, "
        f"descriptor limit {figures['descriptor_limit']} each. Load average (1 min) "
        f"{os.getloadavg()[0]:.1f} at the end.",
        "",
        "| what | figure |",
        "| --- | --- |",
        f"| normal GET ({', '.join(PATHS)}), no load: median / p95 / max | {figures['baseline']} |",
        f"| the same while the flood below is held open | {figures['under_load']} |",
        f"| idle or half-open connections (half send nothing, half a request line and one header) | "
        f"{figures['idle_opened']} of {figures['idle_asked']} opened in {figures['idle_open_s']:.1f} s, "
        f"{figures['idle_open_at_end']} still open at the end |",
        f"| SSE streams on one queued submission (100 client addresses × 20) | "
        f"{figures['streams_opened']} of {figures['streams_asked']} opened in {figures['streams_open_s']:.1f} s, "
        f"{figures['streams_open_at_end']} still open at the end |",
        f"| followers (database pollers) started for those streams | {figures['followers_started']} |",
        f"| connections the server closed or refused meanwhile | {figures['closed_idle']} closed, "
        f"{figures['refused']} refused |",
        f"| server's peak memory (RSS) | {figures['max_rss_mb']} MB |",
        "",
    ])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--idle", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=2_000)
    parser.add_argument("--requests", type=int, default=60, help="normal GETs timed under load, 0.2 s apart")
    parser.add_argument("--hold", type=float, default=300.0, help="the server's header timeout for this run (s)")
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    parser.add_argument("--serve", metavar="DB", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.hold))
        return
    figures = asyncio.run(run(args))
    text = report(figures, args)
    print(text)
    print(json.dumps(figures, indent=1))
    if args.write:
        RESULTS.write_text(text)


if __name__ == "__main__":
    main()
