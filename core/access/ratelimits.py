"""Rate limits per leaderboard and mode: at most N submissions per user in any hour.

The count and the insert it allows happen in one transaction that first writes the user's row:
that write is held until the transaction ends (a row lock on PostgreSQL, the database's one write
lock on SQLite), so one user's submissions are counted one at a time by every bot process sharing
the database, and a burst cannot all read the same count.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from math import ceil

from sqlalchemy import ColumnElement, func, or_, update
from sqlmodel import Session, col, select

from kernelcup.core.errors import RateLimited
from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import RateLimit, Submission, User

ANY_MODE = "*"
_WINDOW = timedelta(hours=1)


def set_limit(session: Session, board_id: int | None, mode: str, max_per_hour: int | None) -> None:
    """Set (or with None remove) the limit for a leaderboard (None: all) and mode ("*": all)."""
    row = session.exec(
        select(RateLimit).where(RateLimit.leaderboard_id == board_id, RateLimit.mode == mode)
    ).first()
    if max_per_hour is None:
        if row is not None:
            session.delete(row)
        return
    if row is None:
        row = RateLimit(leaderboard_id=board_id, mode=mode, max_per_hour=max_per_hour)
    row.max_per_hour = max_per_hour
    session.add(row)


def check(session: Session, user_id: int, board_id: int, mode: str, now: datetime, *,
          default_per_hour: int = 0) -> None:
    """Refuse with the limit and when to try again. ``default_per_hour`` (the config's
    ``limits.submissions_per_hour``) counts every leaderboard and mode unless an admin set such a
    limit themselves (``rate-limit * * N``), which replaces it; 0 means none. The caller inserts
    the submission in the same transaction (``session``), which holds the user's lock till then."""
    limits = list(session.exec(
        select(RateLimit).where(
            or_(col(RateLimit.leaderboard_id) == board_id, col(RateLimit.leaderboard_id).is_(None)),
            col(RateLimit.mode).in_([mode, ANY_MODE]),
        )
    ).all())
    overall = any(limit.leaderboard_id is None and limit.mode == ANY_MODE for limit in limits)
    if default_per_hour > 0 and not overall:
        limits.append(RateLimit(leaderboard_id=None, mode=ANY_MODE, max_per_hour=default_per_hour))
    if limits:
        _hold_user(session, user_id)
    since = now - _WINDOW
    for limit in limits:
        counted: list[ColumnElement[bool]] = [col(Submission.user_id) == user_id, col(Submission.created_at) >= since]
        if limit.leaderboard_id is not None:
            counted.append(col(Submission.leaderboard_id) == board_id)
        if limit.mode != ANY_MODE:
            counted.append(col(Submission.mode) == limit.mode)
        used = session.exec(select(func.count()).select_from(Submission).where(*counted)).one()
        if used >= limit.max_per_hour:
            scope = "this leaderboard" if limit.leaderboard_id is not None else "all leaderboards"
            what = f"{limit.mode} submissions" if limit.mode != ANY_MODE else "submissions"
            retry_after = _retry_after(session, counted, used - limit.max_per_hour, now)
            raise RateLimited(
                f"Rate limit reached: {limit.max_per_hour} {what} per hour on {scope}.",
                f"Try again in {ceil(retry_after / 60)} min; the limit counts the last 60 minutes.",
                retry_after_s=retry_after,
            )


def _hold_user(session: Session, user_id: int) -> None:
    """Write the user's row (to itself) before counting: the lock lasts until the transaction ends."""
    session.execute(update(User).where(col(User.id) == user_id).values(banned=col(User.banned))
                    .execution_options(synchronize_session=False))


def _retry_after(session: Session, counted: list[ColumnElement[bool]], skip: int, now: datetime) -> float:
    """Seconds until a slot frees: when the oldest submission that keeps the count at the limit
    leaves the window."""
    ages_out = session.exec(
        select(Submission.created_at).where(*counted).order_by(col(Submission.created_at)).offset(skip).limit(1)
    ).first()
    if ages_out is None:
        return _WINDOW.total_seconds()
    return max(1.0, (as_utc(ages_out) + _WINDOW - now).total_seconds())


def list_limits(session: Session) -> list[RateLimit]:
    return list(session.exec(select(RateLimit)).all())
