"""The final standings on the real harness: the local runner re-runs the entries on the CPU."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
import time_machine
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from kernelcup.core.scheduling.announcements import Occasion
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import FinalRun, FinalStanding
from kernelcup.runners.local import LocalRunner
from tests.scheduling.conftest import ADMIN, ALICE, BOB, NOW, ROOT, Bots, eventually, settings_for
from tests.scheduling.gpu_final import tiny_identity

pytestmark = pytest.mark.slow


def with_score(solution: str, score_s: float) -> bytes:
    """A shipped solution, and the score the scripted runner reports for it before the close."""
    source = (ROOT / "leaderboards/identity/solutions" / solution).read_text()
    return f"{source}\n# kc-score: {score_s!r} 0.0\n".encode()


async def test_the_local_runner_re_runs_the_entries_and_a_wrong_kernel_drops_out(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller, tmp_path: Path
) -> None:
    folder = tiny_identity(tmp_path / "boards")
    scripted = await bots.start(sqlite_engine, final_rounds=1)
    created = await scripted.ask("create", folder=str(folder), deadline=(NOW + timedelta(hours=2)).isoformat())
    assert created.ok, created.text()
    # Before the close both count as passing; the wrong one only fails on the real harness.
    await scripted.ranked(ALICE, with_score("pytorch.py", 2e-3), board="tiny")
    await scripted.ranked(BOB, with_score("wrong_offbyone.py", 1e-3), board="tiny")
    await bots.stop(scripted)

    clock.move_to(NOW + timedelta(hours=2, seconds=1))
    local = await bots.start(sqlite_engine, LocalRunner(settings_for(tmp_path), gpu="cpu"), final_rounds=1)
    await eventually(lambda: Occasion.FINAL_STANDINGS in local.occasions(), timeout_s=120, what="the final")

    with session_scope(sqlite_engine) as session:
        rows = session.exec(select(FinalStanding).order_by(col(FinalStanding.id))).all()
    alice, bob = rows
    assert (alice.rank, alice.rank_before, bob.rank, bob.rank_before) == (1, 2, None, 1)
    assert alice.score is not None and alice.score_low is not None and alice.score_high is not None
    assert alice.score_low <= alice.score <= alice.score_high  # the harness's CI of the median
    assert bob.note.startswith("failed:")


MARKER = "SECRET-MARKER-123"
RAISES = f'''from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    raise ValueError("{MARKER}")


# kc-score: 0.001 0.0
'''


async def test_the_final_standings_tell_no_one_what_a_failed_re_run_raised(
    bots: Bots, sqlite_engine: Engine, clock: time_machine.Traveller, tmp_path: Path
) -> None:
    """Bob's entry ranks first before the close, then raises an exception quoting its own source
    when the real harness re-runs it. The announcement and the stored standings say how it ended,
    not what it raised; Bob still reads it, Alice does not (the leaderboard keeps code private
    after the deadline). SECURITY.md, What a submission shows whom."""
    folder = tiny_identity(tmp_path / "boards")
    task = folder / "task.yml"
    task.write_text(task.read_text() + "code_public_after_deadline: false\n")
    scripted = await bots.start(sqlite_engine, final_rounds=1)
    created = await scripted.ask("create", folder=str(folder), deadline=(NOW + timedelta(hours=2)).isoformat())
    assert created.ok, created.text()
    await scripted.ranked(ALICE, with_score("pytorch.py", 2e-3), board="tiny")
    await scripted.ranked(BOB, RAISES.encode(), board="tiny")  # the scripted runner passes it
    await bots.stop(scripted)

    clock.move_to(NOW + timedelta(hours=2, seconds=1))
    local = await bots.start(sqlite_engine, LocalRunner(settings_for(tmp_path), gpu="cpu"), final_rounds=1)
    await eventually(lambda: Occasion.FINAL_STANDINGS in local.occasions(), timeout_s=120, what="the final")

    announced = "\n".join(local.texts(Occasion.FINAL_STANDINGS))
    assert "bob" in announced and "crashed" in announced and MARKER not in announced
    with session_scope(sqlite_engine) as session:
        rows = session.exec(select(FinalStanding).order_by(col(FinalStanding.id))).all()
        rerun = session.exec(select(FinalRun).where(col(FinalRun.user_id) == rows[1].user_id)).one()
    assert [(row.rank, row.note) for row in rows] == [(1, ""), (None, "crashed")]
    for actor, sees in ((ALICE, False), (BOB, True), (ADMIN, True)):
        reply = await local.ask("get-submission", actor, id=rerun.submission_id)
        assert reply.ok and (MARKER in reply.text()) is sees, (actor.identity, reply.text())
