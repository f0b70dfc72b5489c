"""Withdrawing a submission: its runs leave the rankings and the final standings; the row stays.

The row, its code and its runs are kept for audit (who withdrew it, when, and an admin's reason),
seen from then on by its author and admins only (``kernelcup.core.access.visibility``). Each
entry the submission could hold is recomputed from its author's other runs, under the same
per-entry lock ``record_run`` takes, so a run stored meanwhile is either seen as withdrawn or
rebuilt away.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import structlog
from sqlalchemy import delete, update
from sqlmodel import Session, col, select

from kernelcup.core.leaderboards.ranking import rebuild_entry
from kernelcup.core.store.models import FinalStanding, Job, JobStatus, Submission, User

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class Withdrawal:
    submission_id: int
    open_job_ids: list[int]  # queued or running: the caller cancels them once this has committed
    left_final_standings: bool


def withdraw(session: Session, submission: Submission, *, by: User, reason: str | None, now: datetime) -> Withdrawal:
    """Mark ``submission`` withdrawn by ``by`` and take its runs out of every ranking."""
    assert submission.id is not None and by.id is not None
    submission.withdrawn_at = now
    submission.withdrawn_by_id = by.id
    submission.withdrawn_reason = reason or None
    session.add(submission)
    session.flush()
    jobs = session.exec(select(Job).where(col(Job.submission_id) == submission.id)).all()
    for gpu in sorted({job.gpu for job in jobs}):
        rebuild_entry(session, submission.leaderboard_id, gpu, submission.user_id)
    left_final = _leave_final_standings(session, submission.id)
    open_jobs = [job.id for job in jobs
                 if job.id is not None and job.status in (JobStatus.QUEUED.value, JobStatus.RUNNING.value)]
    log.info("submission withdrawn", submission_id=submission.id, leaderboard_id=submission.leaderboard_id,
             author_id=submission.user_id, by=by.identity, by_author=by.id == submission.user_id,
             reason=reason or "", open_jobs=len(open_jobs), left_final_standings=left_final)
    return Withdrawal(submission.id, open_jobs, left_final)


def _leave_final_standings(session: Session, submission_id: int) -> bool:
    """Remove the submission's entries from final standings already published; those ranked
    below each move up one place."""
    rows = session.exec(select(FinalStanding).where(col(FinalStanding.submission_id) == submission_id)).all()
    for row in rows:
        if row.rank is not None:
            session.execute(
                update(FinalStanding)
                .where(col(FinalStanding.leaderboard_id) == row.leaderboard_id, col(FinalStanding.gpu) == row.gpu,
                       col(FinalStanding.rank) > row.rank)
                .values(rank=col(FinalStanding.rank) - 1)
            )
    if rows:
        session.execute(delete(FinalStanding).where(col(FinalStanding.submission_id) == submission_id))
    return bool(rows)
