"""A bot process SIGKILLed mid-job: the next one finishes the job or fails it clearly.

Real processes on one SQLite file, as the bot runs by default."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.pipeline.jobrows import restart_failure
from kernelcup.core.store.models import JobStatus, Run

from .support import job, seed_leaderboard, submit

# SQLite only: the recovery logic is the same on PostgreSQL (test_queue runs it there in-process)
# and each bot process costs a second or two to start.
pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("database_url", ["sqlite"], indirect=True),
]
WORKER = Path(__file__).with_name("worker_process.py")
ROOT = Path(__file__).resolve().parents[2]


def start_bot(url: str, worker_id: str, behaviour: str, pidfile: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, str(WORKER), url, worker_id, behaviour, str(pidfile)]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def kill_mid_job(bot: subprocess.Popen[bytes], pidfile: Path) -> None:
    """Wait until the harness runs, then SIGKILL the bot (and the orphaned harness after it)."""
    deadline = time.monotonic() + 20
    while not pidfile.exists():
        assert bot.poll() is None, bot.stderr.read().decode() if bot.stderr else ""
        assert time.monotonic() < deadline, "the harness never started"
        time.sleep(0.02)
    bot.send_signal(signal.SIGKILL)
    bot.wait()
    harness_pid = int(pidfile.read_text().split()[0])
    with suppress(ProcessLookupError):  # it has its own group: the bot's death spares it
        os.killpg(harness_pid, signal.SIGKILL)


def finish(bot: subprocess.Popen[bytes]) -> None:
    _, stderr = bot.communicate(timeout=30)
    assert bot.returncode == 0, stderr.decode()


def runs(engine: Engine, job_id: int) -> list[Run]:
    with Session(engine) as session:
        return list(session.exec(select(Run).where(Run.job_id == job_id)).all())


def test_a_job_killed_with_its_bot_is_rerun_by_the_next_bot(engine: Engine, database_url: str, tmp_path: Path) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine, runner="local")
    kill_mid_job(start_bot(database_url, "bot-1", "slow", tmp_path / "a"), tmp_path / "a")
    assert job(engine, job_id).status == JobStatus.RUNNING  # as the dead bot left it

    finish(start_bot(database_url, "bot-1", "pass", tmp_path / "b"))
    row = job(engine, job_id)
    assert (row.status, row.attempts, row.error) == (JobStatus.SUCCEEDED, 2, None)
    assert [run.passed for run in runs(engine, job_id)] == [True]


def test_a_job_whose_bot_dies_twice_fails_with_a_clear_message(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine, runner="local")
    # Worker ids from host and pid ("-"): the next bot knows the job by its stale heartbeat.
    kill_mid_job(start_bot(database_url, "-", "slow", tmp_path / "a"), tmp_path / "a")
    kill_mid_job(start_bot(database_url, "-", "slow", tmp_path / "b"), tmp_path / "b")
    assert job(engine, job_id).attempts == 2

    finish(start_bot(database_url, "-", "pass", tmp_path / "c"))
    row = job(engine, job_id)
    assert (row.status, row.error) == (JobStatus.FAILED, restart_failure(2))
    assert row.error == ("the bot restarted twice while this job ran; it was not retried again — please resubmit")
    assert runs(engine, job_id) == []
    assert not (tmp_path / "c").exists()  # it was not run a third time
