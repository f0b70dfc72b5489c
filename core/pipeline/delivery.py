"""Delivering a submission's outcome where it was asked for: once, and even after a restart.

A chat adapter keeps the place of its answer (the message it edits live) in
``Submission.reply_to``, a string the core stores and hands back without reading it. When the
adapter connects, it asks for its submissions whose report is still owed and follows each one
again, so a restart mid-run, or a run that finished while the bot was down, still ends in chat.

Delivering the final report is claimed with ``UPDATE ... WHERE delivered_at IS NULL``: with
several bot processes following one submission, exactly one of them delivers it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

import structlog
from sqlalchemy import ColumnElement, exists, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Mapped
from sqlmodel import col

from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Job, JobStatus, Submission, User, utcnow

log = structlog.get_logger(__name__)

_OPEN = [JobStatus.QUEUED.value, JobStatus.RUNNING.value]
RESUMED_NOTE = "Followed again after a restart of the bot."  # what a resumed message says

Where = TypeVar("Where")


@dataclass(frozen=True)
class OwedReport:
    """A submission whose final report has not been delivered yet."""

    submission_id: int
    reply_to: str  # as the adapter stored it
    submitter: str  # the submitter's identity, e.g. "discord:1234"
    finished: bool  # every job has ended: only the report itself is left


def _has_open_jobs(submission_id: Mapped[int | None] | int) -> ColumnElement[bool]:
    return exists().where(col(Job.submission_id) == submission_id, col(Job.status).in_(_OPEN))


def owed_reports(engine: Engine, reply_to_prefix: str, created_before: datetime | None = None) -> list[OwedReport]:
    """Submissions whose ``reply_to`` starts with ``reply_to_prefix`` (an adapter's own, such as
    ``"discord:"``) and whose report is owed: still running, or finished but never delivered;
    only those created before ``created_before`` when it is given."""
    query = (
        select(col(Submission.id), col(Submission.reply_to), col(User.identity),
               _has_open_jobs(col(Submission.id)))
        .join(User, col(User.id) == col(Submission.user_id))
        .where(col(Submission.delivered_at).is_(None),
               col(Submission.reply_to).startswith(reply_to_prefix, autoescape=True))
        .order_by(col(Submission.id))
    )
    if created_before is not None:
        query = query.where(col(Submission.created_at) < created_before)
    with session_scope(engine) as session:
        rows = session.execute(query).all()
    return [OwedReport(submission_id, reply_to, identity, finished=not still_open)
            for submission_id, reply_to, identity, still_open in rows]


def set_reply_to(engine: Engine, submission_id: int, reply_to: str) -> None:
    """Where the answer is now: the adapter posted (or re-posted) the message it edits."""
    with session_scope(engine) as session:
        session.execute(
            update(Submission).where(col(Submission.id) == submission_id).values(reply_to=reply_to)
        )


def claim_report(engine: Engine, submission_id: int, now: datetime) -> bool:
    """True when the final report is ours to deliver: every job has ended and no process has
    claimed it before. Claimed is delivered: a delivery that then fails is not tried again."""
    claim = (
        update(Submission)
        .where(col(Submission.id) == submission_id,
               col(Submission.delivered_at).is_(None),
               ~_has_open_jobs(submission_id))
        .values(delivered_at=now)
        .returning(col(Submission.id))
    )
    with session_scope(engine) as session:
        return session.execute(claim).first() is not None


def report_delivered(engine: Engine, submission_id: int) -> bool:
    """Whether some process has delivered (claimed) the report: its progress edits must stop,
    or a late one could cover the report in the message they share."""
    query = select(col(Submission.delivered_at)).where(col(Submission.id) == submission_id)
    with session_scope(engine) as session:
        return session.execute(query).scalar_one_or_none() is not None


async def owed_here(
    engine: Engine, reply_to_prefix: str, parse: Callable[[str], Where | None], followed: Collection[int]
) -> list[tuple[OwedReport, Where]]:
    """An adapter's owed reports that it can place (``parse`` reads its ``reply_to``) and does
    not follow already: the ones to follow again when it connects. Only submissions made before
    this call: a newer one is followed live by the process that took it, which may not have
    counted it in ``followed`` yet."""
    owed = await asyncio.to_thread(owed_reports, engine, reply_to_prefix, utcnow())
    placed = [(entry, where) for entry in owed if (where := parse(entry.reply_to)) is not None]
    resumed = [(entry, where) for entry, where in placed if entry.submission_id not in followed]
    if owed:
        log.info("following submissions again", resumed=len(resumed), owed=len(owed), platform=reply_to_prefix)
    return resumed


async def remember_reply_to(engine: Engine, submission_id: int, reply_to: str) -> None:
    """:func:`set_reply_to` from an adapter's event loop; a failure is logged, never raised:
    it is bookkeeping for a restart, and the delivery in progress goes on without it."""
    try:
        await asyncio.to_thread(set_reply_to, engine, submission_id, reply_to)
    except Exception:
        log.exception("could not store where a submission is shown", submission_id=submission_id)
