"""A leaderboard closes at its deadline, once, and the deadline on its row is what counts."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from sqlalchemy.engine import Engine

from kernelcup.core.messages import Table
from kernelcup.core.scheduling.announcements import Occasion
from kernelcup.core.store.models import FINAL_MODE, Submission
from tests.scheduling.conftest import (
    ALICE,
    BOB,
    NOW,
    Bots,
    board_row,
    count,
    eventually,
    kernel,
    scheduled_job_ids,
    settle,
)


async def test_a_leaderboard_closes_at_its_deadline_and_refuses_late_ranked_runs(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    bot = await bots.start(sqlite_engine)
    board_id = await bot.create(deadline=NOW + timedelta(hours=2))
    await bot.ranked(ALICE, kernel(2e-3))

    clock.move_to(NOW + timedelta(hours=2) - timedelta(seconds=1))
    bot.wakeup()
    await settle()
    assert board_row(sqlite_engine, board_id).closed_at is None

    clock.move_to(NOW + timedelta(hours=2, seconds=1))
    bot.wakeup()
    await eventually(lambda: Occasion.CLOSED in bot.occasions(), what="the close")
    assert board_row(sqlite_engine, board_id).closed_at == NOW + timedelta(hours=2, seconds=1)

    late = await bot.submit(BOB, kernel(1e-3))
    assert not late.ok
    assert "cup closed at 2026-11-21 14:00 UTC" in late.text()
    assert (await bot.submit(BOB, kernel(1e-3), mode="test")).ok  # only ranked runs are refused


async def test_a_deadline_changed_twice_closes_once_at_the_last_one(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    bot = await bots.start(sqlite_engine)
    board_id = await bot.create(deadline=NOW + timedelta(hours=2))
    assert (await bot.ask("set-deadline", leaderboard="cup", deadline="+1d")).ok
    moved = await bot.ask("set-deadline", leaderboard="cup", deadline="2026-11-23T09:30+01:00")
    assert moved.ok and "2026-11-23 08:30 UTC" in moved.text()
    last = NOW.replace(day=23, hour=8, minute=30)
    assert scheduled_job_ids(bot)[f"leaderboard:{board_id}:close"] == last

    for earlier in (NOW + timedelta(hours=2, seconds=1), NOW + timedelta(days=1, seconds=1)):
        clock.move_to(earlier)
        bot.wakeup()
        await settle(0.2)
        assert board_row(sqlite_engine, board_id).closed_at is None
    clock.move_to(last + timedelta(seconds=1))
    bot.wakeup()
    await eventually(lambda: Occasion.FINAL_STANDINGS in bot.occasions(), what="the final standings")
    assert bot.occasions().count(Occasion.CLOSED) == 1
    assert board_row(sqlite_engine, board_id).closed_at == last + timedelta(seconds=1)


async def test_set_deadline_refuses_the_past_and_non_admins(bots: Bots, sqlite_engine: Engine,
                                                            clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create()
    past = await bot.ask("set-deadline", leaderboard="cup", deadline="2026-11-20T12:00Z")
    assert not past.ok and "has already passed" in past.text() and "+0m" in past.text()
    user = await bot.ask("set-deadline", ALICE, leaderboard="cup", deadline="+1d")
    assert not user.ok and "Only admins" in user.text()
    unknown = await bot.ask("set-deadline", leaderboard="cupp", deadline="+1d")
    assert not unknown.ok and "Did you mean cup?" in unknown.text()


async def test_set_deadline_reopens_a_closed_leaderboard_which_then_closes_again(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    bot = await bots.start(sqlite_engine)
    board_id = await bot.create()
    await bot.ranked(ALICE, kernel(2e-3))
    assert (await bot.ask("set-deadline", leaderboard="cup", deadline="+0m")).ok  # close now
    bot.wakeup()
    await eventually(lambda: Occasion.FINAL_STANDINGS in bot.occasions(), what="the first final standings")

    reopened = await bot.ask("set-deadline", leaderboard="cup", deadline="+1h")
    assert reopened.ok and "open again" in reopened.text()
    assert board_row(sqlite_engine, board_id).closed_at is None
    assert count(sqlite_engine, Submission, Submission.mode == FINAL_MODE) == 0  # old re-runs gone
    assert (await bot.submit(BOB, kernel(1e-3))).ok  # ranked is accepted again

    clock.move_to(NOW + timedelta(hours=1, seconds=1))
    bot.wakeup()
    await eventually(lambda: bot.occasions().count(Occasion.FINAL_STANDINGS) == 2, what="the second final")
    assert bot.occasions().count(Occasion.CLOSED) == 2


async def test_deleting_a_leaderboard_removes_its_jobs(bots: Bots, sqlite_engine: Engine,
                                                      clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    board_id = await bot.create(deadline=NOW + timedelta(days=3))
    jobs = set(scheduled_job_ids(bot))
    assert {f"leaderboard:{board_id}:close", f"leaderboard:{board_id}:remind:86400"} <= jobs
    assert (await bot.ask("delete", leaderboard="cup", yes=True)).ok
    assert [job for job in scheduled_job_ids(bot) if job.startswith("leaderboard:")] == []


async def test_list_and_show_give_the_deadline_in_utc_and_relative(bots: Bots, sqlite_engine: Engine,
                                                                  clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=NOW + timedelta(days=2, hours=3))
    listed = await bot.ask("list")
    table = next(b for b in listed.blocks if isinstance(b, Table))
    assert table.rows[0][1] == "2026-11-23 15:00 UTC (closes in 2 days 3 hours)"
    shown = await bot.ask("show", leaderboard="cup")
    assert "deadline 2026-11-23 15:00 UTC (in 2 days 3 hours)" in shown.text()
