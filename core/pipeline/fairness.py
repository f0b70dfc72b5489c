"""Which queued job runs next: round-robin across users, per runner and GPU.

Each job gets a turn when it is queued: its user's next turn on that runner and GPU, but never
earlier than the turn the queue has reached (the lowest turn still queued there). Runners take
queued jobs by (turn, id), so one person's 100 jobs take turns 0-99 and the next person's job
takes the turn the queue is at, running after at most one job of each other user instead of
after all 100. The queue position a user is told counts the jobs ahead in that same order.
"""

from __future__ import annotations

from sqlalchemy import func
from sqlmodel import Session, col, select

from kernelcup.core.store.models import Job, JobStatus, Submission


def current_turn(session: Session, runner: str, gpu: str) -> int:
    """The turn the queue has reached on this runner and GPU (0 when nothing waits)."""
    lowest = session.exec(
        select(func.min(Job.turn)).where(Job.status == JobStatus.QUEUED, Job.runner == runner, Job.gpu == gpu)
    ).one()
    return int(lowest or 0)


def assign_turns(session: Session, user_id: int, jobs: list[Job]) -> None:
    """Give each new job of ``user_id`` its user's next turn in its queue (before adding them)."""
    for job in jobs:
        last_own = session.exec(
            select(func.max(Job.turn))
            .join(Submission, col(Submission.id) == col(Job.submission_id))
            .where(Job.status == JobStatus.QUEUED, Job.runner == job.runner, Job.gpu == job.gpu,
                   Submission.user_id == user_id)
        ).one()
        reached = current_turn(session, job.runner, job.gpu)
        job.turn = reached if last_own is None else max(reached, int(last_own) + 1)
