"""A bot process for the restart tests: a Pipeline with a LocalRunner on a fake harness.

Usage: ``python worker_process.py DB_URL WORKER_ID|- BEHAVIOUR PIDFILE``. It runs until no job
is queued or running, then stops and exits 0; the tests SIGKILL it mid-job instead.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlmodel import Session, col, func, select
from support import fake_harness, make_settings

from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.store.db import make_engine
from kernelcup.core.store.models import Job, JobStatus
from kernelcup.runners.local import LocalRunner


async def main(url: str, worker_id: str, behaviour: str, pidfile: str) -> None:
    engine = make_engine(url)
    runner = LocalRunner(harness_command=fake_harness(behaviour, pidfile), gpu="cpu")
    settings = make_settings(runner="local", heartbeat_s=0.2)
    worker = None if worker_id == "-" else worker_id
    pipeline = Pipeline(engine, settings, {"cpu": runner}, worker_id=worker)
    await pipeline.start()
    unfinished = select(func.count()).select_from(Job).where(col(Job.status).in_([JobStatus.QUEUED, JobStatus.RUNNING]))
    while True:
        with Session(engine) as session:
            if session.exec(unfinished).one() == 0:
                break
        await asyncio.sleep(0.05)
    await pipeline.stop()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
