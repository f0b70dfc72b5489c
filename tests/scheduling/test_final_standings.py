"""The final standings: the top entries re-run fairly after the close, ranked once, announced once."""

from __future__ import annotations

import asyncio
import io
from datetime import timedelta

import time_machine
from rich.console import Console
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from kernelcup.adapters.terminal.console import ConsoleAdapter
from kernelcup.core.messages import Table
from kernelcup.core.scheduling.announcements import Occasion
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import FINAL_MODE, FinalStanding, Job, Submission
from kernelcup.harness.spec import Mode
from tests.scheduling.conftest import (
    ALICE,
    BOB,
    CAROL,
    NOW,
    Bot,
    Bots,
    ScriptedRunner,
    board_row,
    count,
    eventually,
    kernel,
    settle,
)

DEADLINE = NOW + timedelta(hours=2)


async def close(bot: Bot, clock: time_machine.Traveller) -> None:
    clock.move_to(DEADLINE + timedelta(seconds=1))
    bot.wakeup()
    await eventually(lambda: Occasion.FINAL_STANDINGS in bot.occasions(), what="the final standings")


def final_table(bot: Bot) -> list[tuple[str, ...]]:
    final = next(a for p, _, a in bot.app.announcements.sent
                 if p == "recording" and a.occasion is Occasion.FINAL_STANDINGS)
    table = next(b for b in final.reply.blocks if isinstance(b, Table))
    return [row[:2] for row in table.rows]


async def test_final_standings_run_once_and_are_announced(bots: Bots, engine: Engine,
                                                          clock: time_machine.Traveller) -> None:
    bot = await bots.start(engine)
    board_id = await bot.create(deadline=DEADLINE)
    for actor, score in ((ALICE, 2e-3), (BOB, 1e-3), (CAROL, 3e-3)):
        await bot.ranked(actor, kernel(score, label=actor.display_name))
    await close(bot, clock)
    assert final_table(bot) == [("1", "bob"), ("2", "alice"), ("3", "carol")]

    # Firing again, in every way a job can fire again, changes nothing.
    assert bot.app.scheduling is not None
    await bot.app.scheduling.close(board_id)
    await bot.app.scheduling.reconcile()
    bot.wakeup()
    await settle()
    assert bot.occasions().count(Occasion.FINAL_STANDINGS) == 1
    assert bot.occasions().count(Occasion.CLOSED) == 1
    assert count(engine, Submission, Submission.mode == FINAL_MODE) == 3
    assert count(engine, FinalStanding) == 3
    assert board_row(engine, board_id).final_done_at is not None


async def test_reruns_go_back_to_back_interleaved_with_fresh_secret_inputs(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller
) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    for actor, score in ((ALICE, 2e-3), (BOB, 1e-3), (CAROL, 3e-3)):
        await bot.ranked(actor, kernel(score, label=actor.display_name))
    runner: ScriptedRunner = bot.runner
    before = {spec.secret_seed for spec in runner.specs}
    del runner.specs[:]
    await close(bot, clock)
    assert [runner.label(spec) for spec in runner.specs] == ["bob", "alice", "carol"] * 2  # by rank, A B C A B C
    assert all(spec.mode is Mode.RANKED for spec in runner.specs)
    seeds = {spec.secret_seed for spec in runner.specs}
    assert len(seeds) == 1 and seeds.isdisjoint(before)  # one new secret for the whole final


async def test_the_reruns_decide_the_order(bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    await bot.ranked(ALICE, kernel(1e-3, label="alice"))
    await bot.ranked(BOB, kernel(2e-3, label="bob"))
    runner: ScriptedRunner = bot.runner
    runner.measured["alice"] = 3e-3  # alice's best was a lucky run: on fresh inputs she is slower
    await close(bot, clock)
    assert final_table(bot) == [("1", "bob"), ("2", "alice")]


async def test_entries_inside_the_measured_noise_are_tied(bots: Bots, sqlite_engine: Engine,
                                                          clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    await bot.ranked(ALICE, kernel(1.00e-3, 0.05e-3, "alice"))  # 0.95 .. 1.05 ms
    await bot.ranked(BOB, kernel(1.04e-3, 0.05e-3, "bob"))  # 0.99 .. 1.09: overlaps alice
    await bot.ranked(CAROL, kernel(1.20e-3, 0.05e-3, "carol"))  # clear of both
    await close(bot, clock)
    assert final_table(bot) == [("1=", "alice"), ("1=", "bob"), ("3", "carol")]
    with session_scope(sqlite_engine) as session:
        rows = session.exec(select(FinalStanding).order_by(col(FinalStanding.id))).all()
    assert [(r.rank, r.tied) for r in rows] == [(1, True), (1, True), (3, False)]
    assert rows[0].score_low is not None and abs(rows[0].score_low - 0.95e-3) < 1e-12


async def test_a_rerun_that_fails_is_listed_unranked(bots: Bots, sqlite_engine: Engine,
                                                     clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    await bot.ranked(ALICE, kernel(1e-3, label="alice"))
    await bot.ranked(BOB, kernel(2e-3, label="bob"))
    runner: ScriptedRunner = bot.runner
    runner.fail_labels = {"alice"}
    await close(bot, clock)
    final = next(a for p, _, a in bot.app.announcements.sent if a.occasion is Occasion.FINAL_STANDINGS)
    table = next(b for b in final.reply.blocks if isinstance(b, Table))
    # How the re-run ended, not the harness's line ("wrong answer"), which is its author's to read.
    assert [row[:3] for row in table.rows] == [("1", "bob", "2 ms"), ("-", "alice", "failed")]


async def test_ranked_runs_queued_in_time_finish_before_the_final(bots: Bots, sqlite_engine: Engine,
                                                                  clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    deadline = NOW + timedelta(seconds=10)  # a short step: the running job's heartbeat stays fresh
    await bot.create(deadline=deadline)
    await bot.ranked(ALICE, kernel(2e-3, label="alice"))
    runner: ScriptedRunner = bot.runner
    runner.gate = asyncio.Event()
    reply = await bot.submit(BOB, kernel(1e-3, label="bob"))  # in time, still queued at the deadline
    assert reply.ok
    clock.move_to(deadline + timedelta(seconds=1))
    bot.wakeup()
    await eventually(lambda: Occasion.CLOSED in bot.occasions(), what="the close")
    await settle()
    assert count(sqlite_engine, Submission, Submission.mode == FINAL_MODE) == 0  # waiting for bob's run
    runner.gate.set()
    await eventually(lambda: Occasion.FINAL_STANDINGS in bot.occasions(), what="the final standings")
    assert final_table(bot) == [("1", "bob"), ("2", "alice")]


async def test_no_entries_still_gives_final_standings(bots: Bots, sqlite_engine: Engine,
                                                     clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    await bot.create(deadline=DEADLINE)
    await close(bot, clock)
    assert "There were no ranked entries." in bot.texts(Occasion.FINAL_STANDINGS)[0]
    assert count(sqlite_engine, Job) == 0


async def test_the_console_adapter_renders_the_announcements(bots: Bots, sqlite_engine: Engine,
                                                            clock: time_machine.Traveller) -> None:
    bot = await bots.start(sqlite_engine)
    screen = io.StringIO()
    console = ConsoleAdapter(bot.app.settings, {}, stdin=io.StringIO(""), console=Console(file=screen, width=160))
    bot.app.announcements.register(console)
    await bot.create(deadline=DEADLINE)
    await bot.ranked(ALICE, kernel(2e-3, label="alice"))
    await close(bot, clock)
    shown = screen.getvalue()
    assert "announcement (terminal)" in shown
    for words in ("Leaderboard cup is open", "alice takes first place on cup (cpu)",
                  "cup closed at 2026-11-21 14:00 UTC", "Final standings · cup"):
        assert words in shown, words
