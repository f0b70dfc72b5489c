"""Deleting a leaderboard deletes everything that belongs to it, and nothing else."""

from __future__ import annotations

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session, SQLModel, col, select

from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import (
    BestScore,
    Code,
    Job,
    Leaderboard,
    LeaderboardFile,
    LeaderboardGpu,
    RateLimit,
    Run,
    Submission,
    User,
)

from .scenario import Scenario

OWNED = (LeaderboardFile, LeaderboardGpu, RateLimit, Submission, Job, Run, BestScore)


def _count(engine: Engine, table: type[SQLModel]) -> int:
    with Session(engine) as session:
        return session.exec(select(func.count()).select_from(table)).one()


def test_deleting_a_leaderboard_cascades_to_its_rows(scenario: Scenario) -> None:
    doomed, kept = scenario.leaderboard("doomed"), scenario.leaderboard("kept")
    alice = scenario.user("alice")
    for board in (doomed, kept):
        scenario.ranked(board, alice, 1.0)
        scenario.ranked(board, alice, 0.5)
        with session_scope(scenario.engine) as session:
            session.add(LeaderboardFile(leaderboard_id=board, name="task.py", content="x"))
            session.add(RateLimit(leaderboard_id=board, mode="ranked", max_per_hour=5))
    counts = {table: _count(scenario.engine, table) for table in OWNED}

    with session_scope(scenario.engine) as session:
        found = session.get(Leaderboard, doomed)
        assert found is not None
        session.delete(found)

    for table in OWNED:
        assert _count(scenario.engine, table) * 2 == counts[table], table.__name__
    with Session(scenario.engine) as session:
        assert session.exec(select(Leaderboard.name)).all() == ["kept"]
        left = session.exec(select(col(Submission.leaderboard_id)).distinct()).all()
        assert left == [kept]
    assert _count(scenario.engine, User) == 1
    assert _count(scenario.engine, Code) == 1
