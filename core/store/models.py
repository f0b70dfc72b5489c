"""Database tables. The runs are the source of truth; ``BestScore`` is a derived index of them,
written in the same transaction as each ranked run so ``show`` never scans the runs table."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

import sqlalchemy as sa
from sqlalchemy import BigInteger, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from kernelcup.core.roles import Role as Role  # re-exported: the roles were defined here first
from kernelcup.core.store.db import UTCDateTime

# Named constraints from the first migration on: SQLite batch migrations can only drop or alter
# a constraint that has a name, and the names then match on both databases.
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"  # the harness finished; the run may still have failed its checks
    FAILED = "failed"  # no result: the runner or the harness broke, or the job was given up
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self not in (JobStatus.QUEUED, JobStatus.RUNNING)


# A submission's mode for the re-runs of the final standings (kernelcup.core.scheduling.standings_final): the harness
# runs it as ranked; its runs never enter BestScore, so the final can only re-rank, not re-enter.
FINAL_MODE = "final"


class User(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    # "discord:1234", "console:alice"
    identity: str = Field(unique=True, index=True, max_length=200)
    display_name: str = Field(max_length=200)
    banned: bool = Field(default=False, index=True)  # ranking queries read the few banned ids
    # Named in exported data sets (``publish-name on``); otherwise a pseudonym (kernelcup.core.export).
    named_in_exports: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Leaderboard(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=100)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    lang: str = Field(default="py", max_length=8)
    deadline: datetime = Field(sa_type=UTCDateTime)  # tz-aware; a naive one is refused
    ranking_by: str = Field(default="geom", max_length=16)
    # "public"; "hidden" (its creator and admins); "private" (and its members: kernelcup.core.access.membership)
    visibility: str = Field(default="public", max_length=16)
    task_json: str = Field(sa_column=Column(Text, nullable=False))  # the parsed task.yml
    # Combined with each case seed in ranked runs; never leaves the core except inside a job spec.
    secret_seed: int = Field(sa_column=Column(BigInteger, nullable=False))
    paused: bool = Field(default=False)
    source_dir: str | None = Field(default=None, max_length=500)  # folder it was synced from
    # Runs on a CUDA GPU only, never on the CPU (kernelcup.core.leaderboards.devices decides, at sync).
    needs_cuda: bool = Field(default=False, sa_column_kwargs={"server_default": sa.false()})
    creator_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    # The schedule's progress (kernelcup.core.scheduling.scheduler). Each is set once by a claiming
    # ``UPDATE ... WHERE x IS NULL``, so two bot processes never both act on a step.
    opened_announced_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    closed_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    final_queued_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    final_done_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    # A private leaderboard's invite code (only its sha256; the code is shown once) and role list
    # (space-separated entries as in the config's roles: identities, platform roles).
    invite_code_sha256: str | None = Field(default=None, max_length=64)
    member_roles: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))


class LeaderboardMember(SQLModel, table=True):
    """Who may see and enter a private leaderboard besides its creator and admins."""

    __table_args__ = (UniqueConstraint("leaderboard_id", "user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id", ondelete="CASCADE")
    via: str = Field(max_length=16)  # "code" or "role"
    joined_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class LeaderboardFile(SQLModel, table=True):
    """A task file (task.py, reference.py, helpers, templates) by the name the harness gives it."""

    __table_args__ = (UniqueConstraint("leaderboard_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", index=True, ondelete="CASCADE")
    name: str = Field(max_length=200)
    content: str = Field(sa_column=Column(Text, nullable=False))


class LeaderboardGpu(SQLModel, table=True):
    __table_args__ = (UniqueConstraint("leaderboard_id", "gpu"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", index=True, ondelete="CASCADE")
    gpu: str = Field(max_length=50)


class Code(SQLModel, table=True):
    """Submitted source, stored once per sha256."""

    sha256: str = Field(primary_key=True, max_length=64)
    content: str = Field(sa_column=Column(Text, nullable=False))


class Submission(SQLModel, table=True):
    __table_args__ = (
        Index("ix_submission_user_created", "user_id", "created_at"),  # `mine`
        Index("ix_submission_board_user_created", "leaderboard_id", "user_id", "created_at"),
    )
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id", index=True)
    code_sha256: str = Field(foreign_key="code.sha256", max_length=64)
    file_name: str = Field(max_length=200)
    mode: str = Field(max_length=16)
    # Opaque, adapter-owned: where to deliver the outcome, so a restart can still answer.
    reply_to: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # When a chat adapter delivered the final report (kernelcup.core.pipeline.delivery); set once by a claiming
    # ``UPDATE ... WHERE delivered_at IS NULL``. Indexed: each adapter start looks for the NULLs.
    delivered_at: datetime | None = Field(default=None, index=True, sa_type=UTCDateTime)
    created_at: datetime = Field(default_factory=utcnow, index=True, sa_type=UTCDateTime)
    # Withdrawn (``withdraw``) by its author, or by an admin with a reason: the row and its runs
    # stay for audit, out of every ranking and of the final standings, seen by author and admins only.
    withdrawn_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    withdrawn_by_id: int | None = Field(default=None, foreign_key="user.id")
    withdrawn_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class Job(SQLModel, table=True):
    """One per requested GPU of a submission."""

    # The order runners take queued jobs in (kernelcup.core.pipeline.fairness): by turn, then by id.
    __table_args__ = (Index("ix_job_queue_order", "status", "runner", "turn", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    submission_id: int = Field(foreign_key="submission.id", index=True, ondelete="CASCADE")
    gpu: str = Field(max_length=50)
    runner: str = Field(max_length=50)
    status: str = Field(default=JobStatus.QUEUED, max_length=16)
    turn: int = Field(default=0, sa_column_kwargs={"server_default": "0"})  # its user's turn in the queue
    attempts: int = Field(default=0)
    worker: str | None = Field(default=None, max_length=100)  # which process holds it
    runner_ref: str | None = Field(default=None, max_length=200)  # e.g. a remote call id
    progress: str | None = Field(default=None, max_length=200)  # last progress event, as text
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    queued_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    started_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    heartbeat_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    finished_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class Run(SQLModel, table=True):
    """What the harness reported for one job."""

    # rebuild_best's scan, and deleting a leaderboard without reading every run.
    __table_args__ = (Index("ix_run_board_gpu_user", "leaderboard_id", "gpu", "user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id", index=True, ondelete="CASCADE")
    submission_id: int = Field(foreign_key="submission.id", index=True, ondelete="CASCADE")
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id")
    gpu: str = Field(max_length=50)
    mode: str = Field(max_length=16)
    passed: bool
    score: float | None = None  # seconds, lower is better
    score_low: float | None = None  # the score's noise range (kernelcup.harness.scoring.noise_range)
    score_high: float | None = None
    result_json: str = Field(sa_column=Column(Text, nullable=False))
    system_json: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class BestScore(SQLModel, table=True):
    """Each user's best passing ranked run per (leaderboard, GPU): derived from Run."""

    __table_args__ = (
        UniqueConstraint("leaderboard_id", "gpu", "user_id"),
        # The ranking order itself, so ranking and counting ahead read only this index.
        Index("ix_bestscore_ranking", "leaderboard_id", "gpu", "score", "submitted_at", "user_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    gpu: str = Field(max_length=50)
    user_id: int = Field(foreign_key="user.id")
    # Indexed so that deleting runs or submissions finds their entries without a scan.
    run_id: int = Field(foreign_key="run.id", ondelete="CASCADE", index=True)
    submission_id: int = Field(foreign_key="submission.id", ondelete="CASCADE", index=True)
    score: float
    score_low: float | None = None  # the run's noise range: entries whose ranges meet are tied
    score_high: float | None = None
    submitted_at: datetime = Field(sa_type=UTCDateTime)


class RateLimit(SQLModel, table=True):
    """At most ``max_per_hour`` submissions per user; leaderboard None means every leaderboard."""

    __table_args__ = (UniqueConstraint("leaderboard_id", "mode"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int | None = Field(
        default=None, foreign_key="leaderboard.id", ondelete="CASCADE"
    )
    mode: str = Field(max_length=16)  # a mode, or "*" for all
    max_per_hour: int


class Setting(SQLModel, table=True):
    """Process-wide switches that every bot instance must see (e.g. submissions paused)."""

    key: str = Field(primary_key=True, max_length=100)
    value: str = Field(sa_column=Column(Text, nullable=False))


class ReminderSent(SQLModel, table=True):
    """A reminder that went out; inserting the row is the claim, so no reminder goes out twice.
    Keyed by the deadline too: moving the deadline re-arms the reminders."""

    __table_args__ = (UniqueConstraint("leaderboard_id", "deadline", "before_s"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    deadline: datetime = Field(sa_type=UTCDateTime)
    before_s: int  # how long before the deadline
    sent_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class FinalRun(SQLModel, table=True):
    """Links a top entry to its re-run for the final standings (a submission in FINAL_MODE)."""

    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", index=True, ondelete="CASCADE")
    gpu: str = Field(max_length=50)
    user_id: int = Field(foreign_key="user.id")
    entry_submission_id: int = Field(foreign_key="submission.id", index=True, ondelete="CASCADE")
    submission_id: int = Field(foreign_key="submission.id", unique=True, ondelete="CASCADE")
    rank_before: int  # the entry's rank on the leaderboard when it closed
    score_before: float


class FinalStanding(SQLModel, table=True):
    """One entry of a leaderboard's final standings, ranked by the re-runs."""

    __table_args__ = (UniqueConstraint("leaderboard_id", "gpu", "user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    gpu: str = Field(max_length=50)
    rank: int | None = None  # None: the re-run did not pass
    tied: bool = Field(default=False)  # within the measured noise of the entry ranked above
    user_id: int = Field(foreign_key="user.id")
    submission_id: int = Field(foreign_key="submission.id", ondelete="CASCADE", index=True)
    score: float | None = None  # seconds, from the re-runs
    score_low: float | None = None  # the measured noise range of ``score``
    score_high: float | None = None
    rank_before: int
    note: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))


class ApiToken(SQLModel, table=True):
    """A personal API token (web API, remote CLI). Only its sha256 is stored: the token itself is
    shown once, so a leaked database cannot be used to act as anyone."""

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="user.id", index=True, ondelete="CASCADE")
    token_sha256: str = Field(unique=True, index=True, max_length=64)
    label: str = Field(default="", max_length=200)  # who asked, e.g. "discord:1234 via token"
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class WebSession(SQLModel, table=True):
    """A browser signed in on the pages. Its cookie holds a random session id, never the API
    token; the database keeps only the id's sha256. Signing out ends it, and so does revoking
    the token it was opened with."""

    id: int | None = Field(default=None, primary_key=True)
    session_sha256: str = Field(unique=True, index=True, max_length=64)
    token_id: int = Field(foreign_key="apitoken.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id", ondelete="CASCADE")
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime)
    ended_at: datetime | None = Field(default=None, sa_type=UTCDateTime)


class WebhookDelivery(SQLModel, table=True):
    """A webhook delivery already acted on (kernelcup.core.store.webhooks): a platform that
    delivers one twice (a retry, a redelivery from its settings page) gets it run once, across
    restarts too."""

    source: str = Field(primary_key=True, max_length=100)  # e.g. "github"
    delivery_id: str = Field(primary_key=True, max_length=200)  # the platform's id of the delivery
    received_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime, index=True)
