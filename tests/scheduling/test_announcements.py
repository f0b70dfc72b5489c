"""Reminders before a deadline, a leaderboard's opening, and a new first place: each announced
once, at the right time, through the core's one announcement path."""

from __future__ import annotations

from datetime import timedelta

import time_machine
from sqlalchemy.engine import Engine

from kernelcup.core.scheduling.announcements import Occasion
from kernelcup.core.store.models import ReminderSent
from tests.scheduling.conftest import (
    ADMIN,
    ALICE,
    BOB,
    CAROL,
    NOW,
    Bots,
    board_row,
    count,
    eventually,
    kernel,
    settle,
)

DEADLINE = NOW + timedelta(days=3)


async def test_reminders_go_out_24_hours_and_1_hour_before_the_deadline(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    moments = [
        (DEADLINE - timedelta(hours=24, seconds=1), 0),
        (DEADLINE - timedelta(hours=24), 1),
        (DEADLINE - timedelta(hours=1, seconds=1), 1),
        (DEADLINE - timedelta(hours=1), 2),
    ]
    for moment, expected in moments:
        clock.move_to(moment)
        bot.wakeup()
        await settle(0.2)
        if expected:
            await eventually(lambda: bot.texts(Occasion.REMINDER), what="a reminder")
        assert len(bot.texts(Occasion.REMINDER)) == expected, moment
    first, second = bot.texts(Occasion.REMINDER)
    assert "cup closes in 1 day" in first and "Deadline: 2026-11-24 12:00 UTC" in first
    assert "cup closes in 1 hour" in second


async def test_a_reminder_long_past_is_skipped_not_sent_late(bots: Bots, sqlite_engine: Engine,
                                                             clock: time_machine.Traveller) -> None:
    first = await bots.start(sqlite_engine)
    await first.create(deadline=DEADLINE)
    await bots.stop(first)  # down from before the 24 h reminder ...
    clock.move_to(DEADLINE - timedelta(hours=2))  # ... until 22 hours after it
    second = await bots.start(sqlite_engine)
    await settle()
    assert second.texts(Occasion.REMINDER) == []
    clock.move_to(DEADLINE - timedelta(hours=1))
    second.wakeup()
    await eventually(lambda: second.texts(Occasion.REMINDER), what="the 1 h reminder")
    assert "closes in 1 hour" in second.texts(Occasion.REMINDER)[0]
    assert count(sqlite_engine, ReminderSent) == 1


async def test_a_reminder_a_little_late_still_goes_out(bots: Bots, sqlite_engine: Engine,
                                                       clock: time_machine.Traveller) -> None:
    first = await bots.start(sqlite_engine)
    await first.create(deadline=DEADLINE)
    await bots.stop(first)
    clock.move_to(DEADLINE - timedelta(hours=1) + timedelta(minutes=10))  # inside the 15 min grace
    second = await bots.start(sqlite_engine)
    await eventually(lambda: second.texts(Occasion.REMINDER), what="the late 1 h reminder")
    assert "closes in 50 minutes" in second.texts(Occasion.REMINDER)[0]


async def test_moving_the_deadline_rearms_the_reminders(bots: Bots, sqlite_engine: Engine,
                                                        clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=NOW + timedelta(minutes=90))
    clock.move_to(NOW + timedelta(minutes=30))
    bot.wakeup()
    await eventually(lambda: bot.texts(Occasion.REMINDER), what="the 1 h reminder")
    assert (await bot.ask("set-deadline", leaderboard="cup", deadline="+2h")).ok
    clock.move_to(NOW + timedelta(minutes=90))  # the new deadline is 1 hour away
    bot.wakeup()
    await eventually(lambda: len(bot.texts(Occasion.REMINDER)) == 2, what="the re-armed reminder")


async def test_a_new_leaderboard_is_announced_once(bots: Bots, sqlite_engine: Engine,
                                                   clock: time_machine.Traveller) -> None:
    first = await bots.start(sqlite_engine)
    await first.create(deadline=DEADLINE)
    await eventually(lambda: first.texts(Occasion.OPENED), what="the opening")
    assert "Closes 2026-11-24 12:00 UTC (in 3 days)" in first.texts(Occasion.OPENED)[0]
    await bots.stop(first)
    second = await bots.start(sqlite_engine)
    await settle()
    assert second.texts(Occasion.OPENED) == []


async def test_a_hidden_leaderboard_is_never_announced(bots: Bots, sqlite_engine: Engine,
                                                       clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    board_id = await bot.create(deadline=NOW + timedelta(hours=2), hidden=True)
    await bot.ranked(ADMIN, kernel(1e-3))  # a hidden board takes submissions from admins and its creator
    clock.move_to(NOW + timedelta(hours=2, seconds=1))
    bot.wakeup()
    await eventually(lambda: board_row(sqlite_engine, board_id).final_done_at is not None, what="the final")
    await settle(0.1)
    assert bot.occasions() == []


async def test_a_new_first_place_is_announced(bots: Bots, sqlite_engine: Engine,
                                              clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    await bot.ranked(BOB, kernel(2e-3))
    await bot.ranked(ALICE, kernel(1e-3))
    await bot.ranked(CAROL, kernel(3e-3))  # third: no announcement
    await bot.ranked(ALICE, kernel(0.5e-3))  # already first: no announcement
    await eventually(lambda: len(bot.texts(Occasion.NEW_LEADER)) >= 2, what="two new leaders")
    await settle(0.1)
    bob, alice = bot.texts(Occasion.NEW_LEADER)
    assert "bob takes first place on cup (cpu)" in bob and "Score 2 ms." in bob
    assert "alice takes first place on cup (cpu)" in alice and "ahead of bob" in alice
