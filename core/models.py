"""Database tables. The runs are the source of truth; ``BestScore`` is a derived index of them,
written in the same transaction as each ranked run so ``show`` never scans the runs table."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum

from sqlalchemy import BigInteger, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class Role(StrEnum):
    USER = "user"
    CREATOR = "creator"
    ADMIN = "admin"


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


class User(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    identity: str = Field(unique=True, index=True, max_length=200)  # "discord:1234", "console:alice"
    display_name: str = Field(max_length=200)
    banned: bool = Field(default=False)
    created_at: datetime = Field(default_factory=utcnow)


class Leaderboard(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True, index=True, max_length=100)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    lang: str = Field(default="py", max_length=8)
    deadline: datetime  # tz-aware UTC; SQLite drops the zone, the store re-attaches it
    ranking_by: str = Field(default="geom", max_length=16)
    visibility: str = Field(default="public", max_length=16)  # "public" or "hidden"
    task_json: str = Field(sa_column=Column(Text, nullable=False))  # the parsed task.yml
    # Combined with each case seed in ranked runs; never leaves the core except inside a job spec.
    secret_seed: int = Field(sa_column=Column(BigInteger, nullable=False))
    paused: bool = Field(default=False)
    source_dir: str | None = Field(default=None, max_length=500)  # folder it was synced from
    creator_id: int | None = Field(default=None, foreign_key="user.id")
    created_at: datetime = Field(default_factory=utcnow)


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
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", index=True, ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id", index=True)
    code_sha256: str = Field(foreign_key="code.sha256", max_length=64)
    file_name: str = Field(max_length=200)
    mode: str = Field(max_length=16)
    # Opaque, adapter-owned: where to deliver the outcome, so a restart can still answer.
    reply_to: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    delivered_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow, index=True)


class Job(SQLModel, table=True):
    """One per requested GPU of a submission."""

    __table_args__ = (Index("ix_job_status_runner", "status", "runner", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    submission_id: int = Field(foreign_key="submission.id", index=True, ondelete="CASCADE")
    gpu: str = Field(max_length=50)
    runner: str = Field(max_length=50)
    status: str = Field(default=JobStatus.QUEUED, max_length=16)
    attempts: int = Field(default=0)
    worker: str | None = Field(default=None, max_length=100)  # which process holds it
    runner_ref: str | None = Field(default=None, max_length=200)  # e.g. a remote call id
    progress: str | None = Field(default=None, max_length=200)  # last progress event, as text
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    queued_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    heartbeat_at: datetime | None = None
    finished_at: datetime | None = None


class Run(SQLModel, table=True):
    """What the harness reported for one job."""

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id", index=True, ondelete="CASCADE")
    submission_id: int = Field(foreign_key="submission.id", index=True, ondelete="CASCADE")
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    user_id: int = Field(foreign_key="user.id")
    gpu: str = Field(max_length=50)
    mode: str = Field(max_length=16)
    passed: bool
    score: float | None = None  # seconds, lower is better
    result_json: str = Field(sa_column=Column(Text, nullable=False))
    system_json: str = Field(default="{}", sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class BestScore(SQLModel, table=True):
    """Each user's best passing ranked run per (leaderboard, GPU): derived from Run."""

    __table_args__ = (
        UniqueConstraint("leaderboard_id", "gpu", "user_id"),
        Index("ix_bestscore_board_gpu_score", "leaderboard_id", "gpu", "score"),
    )
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int = Field(foreign_key="leaderboard.id", ondelete="CASCADE")
    gpu: str = Field(max_length=50)
    user_id: int = Field(foreign_key="user.id")
    run_id: int = Field(foreign_key="run.id", ondelete="CASCADE")
    submission_id: int = Field(foreign_key="submission.id", ondelete="CASCADE")
    score: float
    submitted_at: datetime


class RateLimit(SQLModel, table=True):
    """At most ``max_per_hour`` submissions per user; leaderboard None means every leaderboard."""

    __table_args__ = (UniqueConstraint("leaderboard_id", "mode"),)
    id: int | None = Field(default=None, primary_key=True)
    leaderboard_id: int | None = Field(default=None, foreign_key="leaderboard.id", ondelete="CASCADE")
    mode: str = Field(max_length=16)  # a mode, or "*" for all
    max_per_hour: int


class Setting(SQLModel, table=True):
    """Process-wide switches that every bot instance must see (e.g. submissions paused)."""

    key: str = Field(primary_key=True, max_length=100)
    value: str = Field(sa_column=Column(Text, nullable=False))
