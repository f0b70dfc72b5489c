"""A leaderboard's deadline and the steps around it, each claimed once in the database.

The deadline on the leaderboard row is the source of truth; the scheduler's jobs are only
reminders to look at it. Every step here is a claim: a conditional ``UPDATE`` (or ``INSERT``)
that changes a row only if nobody did yet, so when two bot processes share one database and
both fire the same job, exactly one of them gets the row back and acts. The claim is the first
statement of its transaction, so on SQLite it takes the write lock before anything is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, delete, or_, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from kernelcup.core.errors import Refused
from kernelcup.core.leaderboards.catalog import new_secret_seed, runnable_gpus
from kernelcup.core.store.db import as_utc, session_scope
from kernelcup.core.store.models import FINAL_MODE, FinalStanding, Leaderboard, ReminderSent, Submission


@dataclass(frozen=True)
class BoardState:
    """What the schedule needs to know about one leaderboard, read in one go."""

    id: int
    name: str
    deadline: datetime
    created_at: datetime
    public: bool
    gpus: tuple[str, ...]
    opened_announced: bool
    closed: bool
    final_queued: bool
    final_done: bool
    reminders_sent: frozenset[int]  # before_s of the reminders sent for this deadline


def board_states(session: Session, board_id: int | None = None) -> list[BoardState]:
    query = select(Leaderboard).order_by(col(Leaderboard.id))
    if board_id is not None:
        query = query.where(col(Leaderboard.id) == board_id)
    states = []
    for board in session.exec(query).all():
        assert board.id is not None
        deadline = as_utc(board.deadline)
        sent = session.exec(
            select(ReminderSent.before_s).where(
                col(ReminderSent.leaderboard_id) == board.id, col(ReminderSent.deadline) == deadline
            )
        ).all()
        states.append(
            BoardState(
                id=board.id,
                name=board.name,
                deadline=deadline,
                created_at=as_utc(board.created_at),
                public=board.visibility == "public",
                gpus=tuple(runnable_gpus(session, board)),
                opened_announced=board.opened_announced_at is not None,
                closed=board.closed_at is not None,
                final_queued=board.final_queued_at is not None,
                final_done=board.final_done_at is not None,
                reminders_sent=frozenset(sent),
            )
        )
    return states


def board_state(engine: Engine, board_id: int) -> BoardState | None:
    with session_scope(engine) as session:
        found = board_states(session, board_id)
    return found[0] if found else None


def _claim(engine: Engine, board_id: int, where: ColumnElement[bool], values: dict[str, object]) -> bool:
    with session_scope(engine) as session:
        claimed = session.execute(
            update(Leaderboard)
            .where(col(Leaderboard.id) == board_id, where)
            .values(**values)
            .returning(col(Leaderboard.id))
        ).first()
    return claimed is not None


def claim_opened(engine: Engine, board_id: int, now: datetime) -> BoardState | None:
    """The "opened" announcement is ours to send (never for a board already past its deadline)."""
    where = and_(
        col(Leaderboard.opened_announced_at).is_(None),
        col(Leaderboard.closed_at).is_(None),
        col(Leaderboard.deadline) > now,
    )
    if not _claim(engine, board_id, where, {"opened_announced_at": now}):
        return None
    return board_state(engine, board_id)


def claim_close(engine: Engine, board_id: int, now: datetime, grace: timedelta) -> BoardState | None:
    """Close the board if its deadline has passed, at most ``grace`` ago (a bot that was down
    longer leaves it to an admin), and nobody closed it yet.

    Closing also draws a new secret seed, so the final standings run on inputs that no run
    before the deadline could have seen.
    """
    where = and_(
        col(Leaderboard.closed_at).is_(None),
        col(Leaderboard.deadline) <= now,
        col(Leaderboard.deadline) >= now - grace,
    )
    if not _claim(engine, board_id, where, {"closed_at": now, "secret_seed": new_secret_seed()}):
        return None
    return board_state(engine, board_id)


def claim_reminder(
    engine: Engine, board_id: int, before: timedelta, now: datetime, grace: timedelta
) -> BoardState | None:
    """The reminder ``before`` the deadline is ours to send now; None when it is not due (the
    deadline moved), long past (more than ``grace`` late: skipped, never sent late), the board
    is closed, or another process sent it."""
    state = board_state(engine, board_id)
    if state is None or state.closed or state.deadline <= now:
        return None
    due = state.deadline - before
    if now < due or now > due + grace:
        return None
    before_s = int(before.total_seconds())
    try:
        with session_scope(engine) as session:
            session.add(ReminderSent(leaderboard_id=board_id, deadline=state.deadline, before_s=before_s,
                                     sent_at=now))
            session.flush()  # the claim: a second process fails here on the unique key
            board = session.get(Leaderboard, board_id)
            if board is None or as_utc(board.deadline) != state.deadline or board.closed_at is not None:
                session.rollback()  # the deadline moved meanwhile: this reminder is stale
                return None
    except IntegrityError:
        return None
    return state


def final_in_progress(board: Leaderboard) -> bool:
    return board.final_queued_at is not None and board.final_done_at is None


def set_deadline(engine: Engine, board_id: int, deadline: datetime) -> bool:
    """Move a leaderboard's deadline; True when this reopened a closed board.

    Reopening forgets the closed state and any final standings (with their re-runs), so the
    board closes again, once, at its new deadline. Refused while the final standings run.
    """
    with session_scope(engine) as session:
        before = session.get(Leaderboard, board_id)
        was_closed = before is not None and before.closed_at is not None
    not_running = or_(col(Leaderboard.final_queued_at).is_(None), col(Leaderboard.final_done_at).is_not(None))
    with session_scope(engine) as session:
        moved = session.execute(
            update(Leaderboard)
            .where(col(Leaderboard.id) == board_id, not_running)
            .values(deadline=deadline, closed_at=None, final_queued_at=None, final_done_at=None)
            .returning(col(Leaderboard.id))
        ).first()
        if moved is None:
            raise Refused(
                "The final standings of this leaderboard are being run right now.",
                "Set the deadline again once they are announced.",
            )
        session.execute(delete(FinalStanding).where(col(FinalStanding.leaderboard_id) == board_id))
        session.execute(
            delete(Submission).where(col(Submission.leaderboard_id) == board_id, col(Submission.mode) == FINAL_MODE)
        )
    return was_closed
