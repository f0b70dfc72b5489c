"""Rate limits per leaderboard and mode: at most N submissions per user in any hour."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import func, or_
from sqlmodel import Session, col, select

from core.errors import Refused
from core.models import RateLimit, Submission

ANY_MODE = "*"


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


def check(session: Session, user_id: int, board_id: int, mode: str, now: datetime) -> None:
    limits = session.exec(
        select(RateLimit).where(
            or_(col(RateLimit.leaderboard_id) == board_id, col(RateLimit.leaderboard_id).is_(None)),
            col(RateLimit.mode).in_([mode, ANY_MODE]),
        )
    ).all()
    since = now - timedelta(hours=1)
    for limit in limits:
        query = select(func.count()).select_from(Submission).where(
            Submission.user_id == user_id, col(Submission.created_at) >= since
        )
        if limit.leaderboard_id is not None:
            query = query.where(Submission.leaderboard_id == board_id)
        if limit.mode != ANY_MODE:
            query = query.where(Submission.mode == limit.mode)
        used = session.exec(query).one()
        if used >= limit.max_per_hour:
            scope = "this leaderboard" if limit.leaderboard_id is not None else "all leaderboards"
            what = f"{limit.mode} submissions" if limit.mode != ANY_MODE else "submissions"
            raise Refused(
                f"Rate limit reached: {limit.max_per_hour} {what} per hour on {scope}.",
                "Try again later; the limit counts the last 60 minutes.",
            )


def list_limits(session: Session) -> list[RateLimit]:
    return list(session.exec(select(RateLimit)).all())
