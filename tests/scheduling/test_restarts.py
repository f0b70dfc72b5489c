"""Restarts, downtime and a second bot process: the deadline still acts exactly once."""

from __future__ import annotations

import asyncio
import os
import pickle
import shlex
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from sqlalchemy import text
from sqlalchemy.engine import Engine

from kernelcup.core.scheduling.announcements import Occasion
from kernelcup.core.scheduling.scheduler import Scheduling
from kernelcup.core.store.db import make_engine
from kernelcup.core.store.models import FINAL_MODE, FinalStanding, ReminderSent, Submission
from tests.scheduling.conftest import (
    ALICE,
    BOB,
    NOW,
    Bot,
    Bots,
    board_row,
    count,
    eventually,
    kernel,
    scheduled_job_ids,
    settle,
)

DEADLINE = NOW + timedelta(hours=2)


def scheduling(bot: Bot) -> Scheduling:
    assert bot.app.scheduling is not None
    return bot.app.scheduling


def total(bots: list[Bot], occasion: Occasion) -> int:
    return sum(bot.occasions().count(occasion) for bot in bots)


async def test_a_restart_between_scheduling_and_firing_still_closes(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    first = await bots.start(sqlite_engine)
    board_id = await first.create(deadline=DEADLINE)
    await first.ranked(ALICE, kernel(1e-3))
    await bots.stop(first)

    second = await bots.start(sqlite_engine)
    assert scheduled_job_ids(second)[f"leaderboard:{board_id}:close"] == DEADLINE  # rebuilt from the row
    clock.move_to(DEADLINE + timedelta(seconds=1))
    second.wakeup()
    await eventually(lambda: Occasion.FINAL_STANDINGS in second.occasions(), what="the final standings")
    assert second.occasions().count(Occasion.CLOSED) == 1
    assert f"leaderboard:{board_id}:close" not in scheduled_job_ids(second)


async def test_a_deadline_missed_while_down_closes_once_when_back(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    first = await bots.start(sqlite_engine)
    board_id = await first.create(deadline=DEADLINE)
    await first.ranked(ALICE, kernel(1e-3))
    await bots.stop(first)
    clock.move_to(DEADLINE + timedelta(hours=1))  # down over the deadline, back inside the 6 h grace

    second = await bots.start(sqlite_engine)
    await eventually(lambda: Occasion.FINAL_STANDINGS in second.occasions(), what="the final standings")
    assert board_row(sqlite_engine, board_id).closed_at == DEADLINE + timedelta(hours=1)
    await bots.stop(second)

    clock.move_to(DEADLINE + timedelta(hours=2))
    third = await bots.start(sqlite_engine)  # and another restart: nothing happens again
    third.wakeup()
    await settle()
    assert total([first, second, third], Occasion.CLOSED) == 1
    assert total([first, second, third], Occasion.FINAL_STANDINGS) == 1
    assert count(sqlite_engine, FinalStanding) == 1


async def test_a_deadline_missed_beyond_the_grace_waits_for_an_admin(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    first = await bots.start(sqlite_engine)
    board_id = await first.create(deadline=DEADLINE)
    await first.ranked(ALICE, kernel(1e-3))
    await bots.stop(first)
    clock.move_to(DEADLINE + timedelta(days=2))  # far beyond the 6 h grace: no stale announcements

    second = await bots.start(sqlite_engine)
    await settle()
    assert second.occasions() == []
    assert board_row(sqlite_engine, board_id).closed_at is None
    assert not (await second.submit(ALICE, kernel(1e-3))).ok  # still closed to ranked runs

    assert (await second.ask("set-deadline", leaderboard="cup", deadline="+0m")).ok
    await eventually(lambda: Occasion.FINAL_STANDINGS in second.occasions(), what="the final standings")


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_two_schedulers_on_one_postgresql_act_once(
    bots: Bots, database_url: str, engine: Engine, clock: time_machine.Traveller
) -> None:
    other_engine = make_engine(database_url)  # the second process has its own connections
    try:
        one = await bots.start(engine)
        two = await bots.start(other_engine)
        both = [one, two]
        board_id = await one.create(deadline=DEADLINE)
        await one.ranked(ALICE, kernel(2e-3, label="alice"))
        await two.ranked(BOB, kernel(1e-3, label="bob"))
        await eventually(lambda: total(both, Occasion.OPENED) == 1, what="the opening")

        # Each step fires in both processes at once (as when both schedulers find the job due),
        # and through the schedulers as well.
        clock.move_to(DEADLINE - timedelta(hours=1))
        await asyncio.gather(*(scheduling(bot).remind(board_id, 3600) for bot in both))
        for bot in both:
            bot.wakeup()
        await eventually(lambda: total(both, Occasion.REMINDER) == 1, what="the 1 h reminder")

        clock.move_to(DEADLINE + timedelta(seconds=1))
        await asyncio.gather(*(scheduling(bot).close(board_id) for bot in both))
        for bot in both:
            bot.wakeup()
        await eventually(lambda: total(both, Occasion.FINAL_STANDINGS) == 1, what="the final standings")
        for bot in both:
            await scheduling(bot).reconcile()
            bot.wakeup()
        await settle(0.5)
        assert [total(both, o) for o in (Occasion.OPENED, Occasion.REMINDER, Occasion.CLOSED,
                                         Occasion.FINAL_STANDINGS)] == [1, 1, 1, 1]
        assert count(engine, ReminderSent) == 1
        assert count(engine, Submission, Submission.mode == FINAL_MODE) == 2  # queued once
        assert count(engine, FinalStanding) == 2
        assert board_row(engine, board_id).final_done_at is not None
        for bot in list(bots.running):
            await bots.stop(bot)
    finally:
        other_engine.dispose()


class RunsACommand:
    """Unpickled, it runs a shell command, as a pickled job written by an attacker would."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.system, (self.command,)


def planted_job_state(proof: Path) -> bytes:
    """The bytes an attacker writes into APScheduler's SQL job table: a job's state, as the store
    pickles it, whose first unpickling touches ``proof``."""
    return pickle.dumps({"version": 1, "id": "planted", "func": "os:getpid", "trigger": None,
                         "executor": "default", "args": (RunsACommand(f"touch {shlex.quote(str(proof))}"),),
                         "kwargs": {}, "name": "planted", "misfire_grace_time": None, "coalesce": True,
                         "max_instances": 1, "next_run_time": None})


async def test_a_job_row_planted_in_the_database_is_never_unpickled(
    bots: Bots, sqlite_engine: Engine, tmp_path: Path, clock: time_machine.Traveller
) -> None:
    """What a submission did once it could write the database: a pickled job that runs code, in
    the table and columns APScheduler's SQLAlchemyJobStore reads, due long ago."""
    proof = tmp_path / "owned"
    payload = planted_job_state(proof)
    with sqlite_engine.begin() as connection:
        connection.execute(text("CREATE TABLE IF NOT EXISTS apscheduler_jobs "
                                "(id VARCHAR(191) PRIMARY KEY, next_run_time FLOAT, job_state BLOB)"))
        connection.execute(text("INSERT INTO apscheduler_jobs VALUES ('planted', 0, :state)"), {"state": payload})
    bot = await bots.start(sqlite_engine)
    board_id = await bot.create(deadline=DEADLINE)
    clock.move_to(DEADLINE + timedelta(seconds=1))
    bot.wakeup()
    await eventually(lambda: Occasion.CLOSED in bot.occasions(), what="the close")
    assert not proof.exists()
    assert set(scheduled_job_ids(bot)) >= {"kernelcup:reconcile"}
    assert all(job == "kernelcup:reconcile" or job.startswith(f"leaderboard:{board_id}:")
               for job in scheduled_job_ids(bot))
    await bots.stop(bot)
    assert not proof.exists()

    pickle.loads(payload)  # the control: the same bytes, unpickled, do run the command
    assert proof.exists()
