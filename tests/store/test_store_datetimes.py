"""Every datetime leaves the store tz-aware UTC, whatever zone it went in with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.exc import StatementError
from sqlmodel import Session, col, select

from kernelcup.core.store.db import make_engine, session_scope
from kernelcup.core.store.models import Leaderboard

PARIS_SUMMER = timezone(timedelta(hours=2))


def _board(name: str, deadline: datetime) -> Leaderboard:
    return Leaderboard(name=name, deadline=deadline, task_json="{}", secret_seed=1)


def test_an_aware_datetime_comes_back_as_the_same_instant_in_utc(engine: Engine) -> None:
    deadline = datetime(2026, 7, 1, 23, 30, 15, 123456, tzinfo=PARIS_SUMMER)
    with session_scope(engine) as session:
        session.add(_board("a", deadline))
    with Session(engine) as session:
        stored = session.exec(select(Leaderboard)).one()
    assert stored.deadline == deadline
    assert stored.deadline.tzinfo is UTC
    assert stored.deadline.isoformat() == "2026-07-01T21:30:15.123456+00:00"
    assert stored.created_at.tzinfo is UTC


def test_comparisons_in_queries_follow_instants_not_wall_clocks(engine: Engine) -> None:
    with session_scope(engine) as session:
        # 22:00 in Paris is before 21:00 UTC: it is 20:00 UTC.
        session.add(_board("late-wall-clock", datetime(2026, 7, 1, 22, tzinfo=PARIS_SUMMER)))
        session.add(_board("early-wall-clock", datetime(2026, 7, 1, 21, tzinfo=UTC)))
    with Session(engine) as session:
        names = session.exec(select(Leaderboard.name).order_by(col(Leaderboard.deadline))).all()
        after = session.exec(
            select(Leaderboard.name).where(
                col(Leaderboard.deadline) > datetime(2026, 7, 1, 22, 30, tzinfo=PARIS_SUMMER)
            )
        ).all()
    assert list(names) == ["late-wall-clock", "early-wall-clock"]
    assert list(after) == ["early-wall-clock"]


def test_a_naive_datetime_is_refused(engine: Engine) -> None:
    refused = pytest.raises(StatementError, match="naive datetime 2026-07-01T12:00:00 refused")
    with refused, session_scope(engine) as session:
        session.add(_board("naive", datetime(2026, 7, 1, 12)))
    with Session(engine) as session:
        assert session.exec(select(Leaderboard)).all() == []


@pytest.mark.postgres
def test_postgres_session_time_zone_does_not_leak_into_values(postgres_url: str) -> None:
    deadline = datetime(2026, 7, 1, 12, tzinfo=UTC)
    plain = make_engine(postgres_url)
    kolkata = make_engine(postgres_url, connect_args={"options": "-c TimeZone=Asia/Kolkata"})
    by_name = select(Leaderboard).where(Leaderboard.name == "time-zone-check")
    try:
        with session_scope(plain) as session:
            session.add(_board("time-zone-check", deadline))
        with session_scope(kolkata) as session:
            stored = session.exec(by_name).one()
            session.delete(stored)
    finally:
        plain.dispose()
        kolkata.dispose()
    assert stored.deadline == deadline
    assert stored.deadline.tzinfo is UTC
