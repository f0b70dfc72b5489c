"""Fan-out: 200 submissions over 4 GPU kinds through the real pipeline and the real Modal runner.

The far end is an in-process Modal stand-in (``FakeModal`` below, the runner's ``client``):
each call "runs" for a random time between ``--min-s`` and ``--max-s`` (seeded) and returns a
signed harness result. So the figures are what the bot's side adds to a fleet of GPUs: claims,
spec building, spawns, polls, result checks, storing runs, on SQLite. The ideal is the total
work divided by the total concurrency (and, stricter, the busiest GPU kind's work divided by
its concurrency). Run: ``.venv/bin/python -m bench.fanout [--submissions 200] [--write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import platform
import random
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import modal.exception
import structlog
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from kernelcup.core.config import GpuConfig, Limits, Settings
from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.store.db import make_engine, upgrade
from kernelcup.core.store.models import Job, JobStatus
from kernelcup.harness.spec import Mode, Progress, Result, Status, SystemInfo, progress_line, result_line
from kernelcup.runners.modal import ModalRunner
from tests.pipeline.support import seed_leaderboard, submit

RESULTS = Path(__file__).with_name("RESULTS-fanout.md")


# The far end: Modal's side of ``kernelcup.runners.modal.ModalClient``, in this process, so a call costs
# no process start (the runner's tests drive the real ModalSDK against tests/stubs/modal instead).
Report = Callable[[str], None]
Remote = Callable[[str, float, Report], Awaitable[dict[str, Any]]]


@dataclass
class Call:
    function: str
    args: tuple[Any, ...]
    task: asyncio.Future[dict[str, Any]] | None = None
    progress: str | None = None  # what the Modal Dict holds for this call
    expired: bool = False

    def report(self, line: str) -> None:
        self.progress = line

    @property
    def running(self) -> asyncio.Future[dict[str, Any]]:
        assert self.task is not None
        return self.task


@dataclass
class FakeModal:
    remote: Remote
    app: str = "kernelcup"
    functions: tuple[str, ...] = ("run_h100", "run_t4", "run_cpu")
    credentials: bool = True
    spawn_error: Exception | None = None  # e.g. a quota refusal
    calls: dict[str, Call] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def configured(self) -> bool:
        return self.credentials

    async def spawn(self, app: str, function: str, *args: Any) -> str:
        if not self.credentials:
            raise modal.exception.AuthError("Token missing. Could not authenticate client.")
        if self.spawn_error is not None:
            raise self.spawn_error
        if app != self.app or function not in self.functions:
            raise modal.exception.NotFoundError(f"Lookup failed for Function '{function}' from the '{app}' app")
        call_id = f"fc-01TEST{next(self._ids):06d}"
        call = Call(function, args)
        call.task = asyncio.ensure_future(self.remote(args[0], args[1], call.report))
        self.calls[call_id] = call
        return call_id

    async def get(self, call_id: str, timeout: float) -> Any:
        call = self.calls.get(call_id)
        if call is None:
            raise modal.exception.NotFoundError(f"Function call {call_id} not found")
        if call.expired:
            raise modal.exception.OutputExpiredError()
        done, _ = await asyncio.wait([call.running], timeout=timeout)
        if not done:
            raise TimeoutError()  # the builtin, as FunctionCall.get raises while the call runs
        if call.running.cancelled():
            raise modal.exception.RemoteError("the call was cancelled")
        return call.running.result()

    async def cancel(self, call_id: str) -> None:
        self.cancelled.append(call_id)
        call = self.calls.get(call_id)
        if call is not None:
            call.running.cancel()

    async def progress(self, call_id: str) -> str | None:
        call = self.calls.get(call_id)
        return None if call is None else call.progress

    async def finish_all(self) -> None:
        """Let every call end (a test's teardown): no task outlives its event loop."""
        for call in self.calls.values():
            call.running.cancel()
        await asyncio.gather(*(c.running for c in self.calls.values()), return_exceptions=True)


def harness_output(
    status: Status = Status.PASSED,
    *,
    seconds: float = 0.0,
    progress: Iterable[Progress] = (),
    gpu: str = "NVIDIA H100 80GB HBM3",
    key: str | None = None,  # sign with another key than the spec's (a forgery)
    gate: asyncio.Event | None = None,
    ranks: Iterable[str] = (),  # a multi-GPU job: which card ran which rank
) -> Remote:
    """A remote that plays the harness: progress lines, then one result line signed with the key."""

    async def remote(spec_json: str, kill_after_s: float, report: Report) -> dict[str, Any]:
        spec = json.loads(spec_json)
        lines = []
        for event in progress:
            lines.append(progress_line(event))
            report(lines[-1])
            await asyncio.sleep(0.01)
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(seconds)
        verdict = "all tests passed" if status is Status.PASSED else status.value
        result = Result(spec["job_id"], Mode(spec["mode"]), status, verdict, score_s=1e-3,
                        system=SystemInfo(device="cuda", gpu=gpu, ranks=list(ranks)))
        lines.append(result_line(result, key or spec["result_key"]))
        return {"lines": lines, "returncode": 0, "stderr": ""}

    return remote

KINDS = {"T4": "Tesla T4", "L4": "NVIDIA L4", "H100": "NVIDIA H100 80GB HBM3", "B200": "NVIDIA B200"}


@dataclass
class Fleet:
    """The GPUs' side: how long each job takes, and how many ran at once per kind."""

    durations: dict[str, float]  # job id -> seconds
    running: Counter[str] = field(default_factory=Counter)
    most: Counter[str] = field(default_factory=Counter)
    work: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    async def remote(self, spec_json: str, kill_after_s: float, report: Report) -> dict[str, Any]:
        spec = json.loads(spec_json)
        kind = spec["gpu"]["name"]
        self.running[kind] += 1
        self.most[kind] = max(self.most[kind], self.running[kind])
        try:
            seconds = self.durations[spec["job_id"]]
            self.work[kind] += seconds
            return await harness_output(seconds=seconds, gpu=KINDS[kind])(spec_json, kill_after_s, report)
        finally:
            self.running[kind] -= 1


@dataclass
class Measurement:
    submissions: int
    concurrency: int
    wall_s: float
    work_s: float
    ideal_s: float  # total work / total concurrency
    bound_s: float  # the busiest kind's work / its concurrency (no schedule can beat it)
    succeeded: int
    spawned: int
    most: dict[str, int]

    @property
    def efficiency(self) -> float:
        return self.ideal_s / self.wall_s


def settings(concurrency: int) -> Settings:
    return Settings(
        limits=Limits(heartbeat_s=5.0),
        gpus={name: GpuConfig(name, "modal", options={"modal_gpu": name}) for name in KINDS},
        runners={"modal": {"concurrency": {"default": concurrency}, "poll_s": 5.0}},
    )


async def measure(engine: Engine, submissions: int, concurrency: int, low: float, high: float, seed: int
                  ) -> Measurement:
    seed_leaderboard(engine)
    kinds = list(KINDS)
    job_ids = [job for index in range(submissions)
               for job in submit(engine, gpus=(kinds[index % len(kinds)],), runner="modal")]
    draw = random.Random(seed)
    fleet = Fleet({str(job_id): draw.uniform(low, high) for job_id in job_ids})
    modal_side = FakeModal(fleet.remote, functions=tuple(f"run_{k.lower()}" for k in KINDS))
    config = settings(concurrency)
    runner = ModalRunner(config, client=modal_side)
    pipeline = Pipeline(engine, config, dict.fromkeys(KINDS, runner))
    open_jobs = select(func.count()).select_from(Job).where(col(Job.status).in_([JobStatus.QUEUED, JobStatus.RUNNING]))
    started = time.perf_counter()
    await pipeline.start()
    while True:
        await asyncio.sleep(0.02)
        with Session(engine) as session:
            if session.exec(open_jobs).one() == 0:
                break
    wall = time.perf_counter() - started
    await pipeline.stop()
    await modal_side.finish_all()
    with Session(engine) as session:
        succeeded = session.exec(select(func.count()).select_from(Job).where(Job.status == JobStatus.SUCCEEDED)).one()
    work = sum(fleet.durations.values())
    per_kind: defaultdict[str, float] = defaultdict(float)
    for index, job_id in enumerate(job_ids):
        per_kind[kinds[index % len(kinds)]] += fleet.durations[str(job_id)]
    return Measurement(submissions, concurrency, wall, work, work / (concurrency * len(KINDS)),
                       max(per_kind.values()) / concurrency, succeeded, len(modal_side.calls), dict(fleet.most))


def table(results: list[Measurement]) -> str:
    lines = [
        "| submissions | concurrency per kind | work (s) | ideal (s) | busiest kind bound (s) | wall (s)"
        " | ideal / wall | succeeded | calls | most at once per kind |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for m in results:
        most = ", ".join(f"{k} {v}" for k, v in sorted(m.most.items()))
        lines.append(
            f"| {m.submissions} | {m.concurrency} | {m.work_s:.1f} | {m.ideal_s:.2f} | {m.bound_s:.2f}"
            f" | {m.wall_s:.2f} | {m.efficiency:.0%} | {m.succeeded} | {m.spawned} | {most} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--submissions", type=int, default=200)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8, 16], help="per GPU kind")
    parser.add_argument("--min-s", type=float, default=0.2)
    parser.add_argument("--max-s", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    load_before = os.getloadavg()[0]
    results = []
    for concurrency in args.concurrency:
        with tempfile.TemporaryDirectory() as folder:
            engine = make_engine(f"sqlite:///{folder}/fanout.db")
            upgrade(engine)
            results.append(asyncio.run(measure(engine, args.submissions, concurrency, args.min_s, args.max_s,
                                               args.seed)))
            engine.dispose()
        print(table(results[-1:]).splitlines()[-1], flush=True)
    text = table(results)
    print(text)
    if args.write:
        machine = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        RESULTS.write_text(
            "# Fan-out over GPU kinds\n\n"
            f"`python -m bench.fanout --submissions {args.submissions} --write`, {date.today()}, 2-core dev box "
            f"({machine}), no GPU; SQLite.\n\n"
            f"{args.submissions} submissions queued at once, one job each, round-robin over "
            f"{', '.join(KINDS)}; each job takes a seeded random {args.min_s:g}–{args.max_s:g} s on its\n"
            "\"GPU\" (the in-process Modal stand-in of bench/fanout.py). Real pipeline, real Modal runner (spawn, the\n"
            "call id stored in the job row, `get` long-polls, signed result checked, Run stored). Ideal =\n"
            "total work / (concurrency per kind x 4 kinds); the busiest kind's work / its concurrency is\n"
            "a bound no schedule beats. Wall: from `start()` to the last job finished (polled every 20 ms).\n\n"
            f"Load average (1 min) {load_before:.1f} before, {os.getloadavg()[0]:.1f} after.\n\n" + text + "\n"
        )


if __name__ == "__main__":
    main()
