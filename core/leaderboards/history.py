"""Scores over time: the leaderboard's record as it improved, and one user's ranked runs.

The web pages' charts, the API's history and the chat's pictures all read these two queries.
Only passing ranked runs with a score count, withdrawn submissions never. Visibility is the
caller's: these read any leaderboard they are given.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlmodel import Session, col

from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import Leaderboard, Run, Submission, User
from kernelcup.harness.spec import Mode


@dataclass(frozen=True)
class ScorePoint:
    at: datetime  # when the submission was made (UTC)
    score: float  # seconds, lower is better
    user_id: int
    user_name: str
    submission_id: int


@dataclass(frozen=True)
class UserScore:
    """One of a user's ranked scores, with the leaderboard and GPU it was ranked on."""

    leaderboard: Leaderboard
    gpu: str
    point: ScorePoint


def record_over_time(session: Session, leaderboard_id: int, gpu: str) -> list[ScorePoint]:
    """Each time the leaderboard's best ranked score on ``gpu`` improved, oldest first (banned
    users left out)."""
    rows = session.execute(
        select(col(Submission.created_at), col(Run.score), col(Run.user_id), col(User.display_name),
               col(Run.submission_id))
        .join(Submission, col(Submission.id) == col(Run.submission_id))
        .join(User, col(User.id) == col(Run.user_id))
        .where(col(Run.leaderboard_id) == leaderboard_id, col(Run.gpu) == gpu, col(Run.mode) == Mode.RANKED.value,
               col(Run.passed), col(Run.score).is_not(None), col(User.banned).is_(False),
               col(Submission.withdrawn_at).is_(None))
        .order_by(col(Submission.created_at), col(Run.id))
    ).all()
    points: list[ScorePoint] = []
    for at, score, user_id, user_name, submission_id in rows:
        if score is not None and (not points or score < points[-1].score):
            points.append(ScorePoint(as_utc(at), score, user_id, user_name, submission_id))
    return points


def user_scores(session: Session, user_id: int, leaderboard_id: int | None = None,
                gpu: str | None = None) -> list[UserScore]:
    """The user's passing ranked runs, oldest first; only one leaderboard's (and GPU's) when given."""
    query = (
        select(Leaderboard, col(Run.gpu), col(Submission.created_at), col(Run.score), col(User.display_name),
               col(Run.submission_id))
        .join(Run, col(Run.leaderboard_id) == col(Leaderboard.id))
        .join(Submission, col(Submission.id) == col(Run.submission_id))
        .join(User, col(User.id) == col(Run.user_id))
        .where(col(Run.user_id) == user_id, col(Run.mode) == Mode.RANKED.value, col(Run.passed),
               col(Run.score).is_not(None), col(Submission.withdrawn_at).is_(None))
        .order_by(col(Submission.created_at), col(Run.id))
    )
    if leaderboard_id is not None:
        query = query.where(col(Run.leaderboard_id) == leaderboard_id)
    if gpu is not None:
        query = query.where(col(Run.gpu) == gpu)
    return [
        UserScore(board, run_gpu, ScorePoint(as_utc(at), score, user_id, user_name, submission_id))
        for board, run_gpu, at, score, user_name, submission_id in session.execute(query).all()
        if score is not None
    ]
