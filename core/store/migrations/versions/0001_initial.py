"""The first schema: every table of kernelcup.core.store.models.

Revision ID: 0001
Revises:
Create Date: 2026-11-21 19:47:40.869226
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401, RUF100  (autogenerate renders AutoString)
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "code",
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_code")),
    )
    op.create_table(
        "setting",
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_setting")),
    )
    op.create_table(
        "user",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("identity", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("display_name", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("banned", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user")),
    )
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_user_banned"), ["banned"], unique=False)
        batch_op.create_index(batch_op.f("ix_user_identity"), ["identity"], unique=True)

    op.create_table(
        "leaderboard",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("description", sa.Text(), server_default="", nullable=False),
        sa.Column("lang", sqlmodel.sql.sqltypes.AutoString(length=8), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ranking_by", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("visibility", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("task_json", sa.Text(), nullable=False),
        sa.Column("secret_seed", sa.BigInteger(), nullable=False),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("source_dir", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=True),
        sa.Column("creator_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["creator_id"], ["user.id"], name=op.f("fk_leaderboard_creator_id_user")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leaderboard")),
    )
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_leaderboard_name"), ["name"], unique=True)

    op.create_table(
        "leaderboardfile",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_leaderboardfile_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leaderboardfile")),
        sa.UniqueConstraint(
            "leaderboard_id", "name", name=op.f("uq_leaderboardfile_leaderboard_id_name")
        ),
    )
    with op.batch_alter_table("leaderboardfile", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_leaderboardfile_leaderboard_id"), ["leaderboard_id"], unique=False
        )

    op.create_table(
        "leaderboardgpu",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_leaderboardgpu_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leaderboardgpu")),
        sa.UniqueConstraint(
            "leaderboard_id", "gpu", name=op.f("uq_leaderboardgpu_leaderboard_id_gpu")
        ),
    )
    with op.batch_alter_table("leaderboardgpu", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_leaderboardgpu_leaderboard_id"), ["leaderboard_id"], unique=False
        )

    op.create_table(
        "ratelimit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=True),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("max_per_hour", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_ratelimit_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ratelimit")),
        sa.UniqueConstraint(
            "leaderboard_id", "mode", name=op.f("uq_ratelimit_leaderboard_id_mode")
        ),
    )
    op.create_table(
        "submission",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("code_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("file_name", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("reply_to", sa.Text(), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["code_sha256"], ["code.sha256"], name=op.f("fk_submission_code_sha256_code")
        ),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_submission_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], name=op.f("fk_submission_user_id_user")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submission")),
    )
    with op.batch_alter_table("submission", schema=None) as batch_op:
        batch_op.create_index(
            "ix_submission_board_user_created",
            ["leaderboard_id", "user_id", "created_at"],
            unique=False,
        )
        batch_op.create_index(batch_op.f("ix_submission_created_at"), ["created_at"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_submission_leaderboard_id"), ["leaderboard_id"], unique=False
        )
        batch_op.create_index("ix_submission_user_created", ["user_id", "created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_submission_user_id"), ["user_id"], unique=False)

    op.create_table(
        "job",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("runner", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("status", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=True),
        sa.Column("runner_ref", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("progress", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name=op.f("fk_job_submission_id_submission"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job")),
    )
    with op.batch_alter_table("job", schema=None) as batch_op:
        batch_op.create_index("ix_job_status_runner", ["status", "runner", "id"], unique=False)
        batch_op.create_index(batch_op.f("ix_job_submission_id"), ["submission_id"], unique=False)

    op.create_table(
        "run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("mode", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("result_json", sa.Text(), nullable=False),
        sa.Column("system_json", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["job.id"], name=op.f("fk_run_job_id_job"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_run_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name=op.f("fk_run_submission_id_submission"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], name=op.f("fk_run_user_id_user")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_run")),
    )
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.create_index(
            "ix_run_board_gpu_user", ["leaderboard_id", "gpu", "user_id"], unique=False
        )
        batch_op.create_index(batch_op.f("ix_run_job_id"), ["job_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_run_submission_id"), ["submission_id"], unique=False)

    op.create_table(
        "bestscore",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("submitted_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_bestscore_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_bestscore_run_id_run"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name=op.f("fk_bestscore_submission_id_submission"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], name=op.f("fk_bestscore_user_id_user")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bestscore")),
        sa.UniqueConstraint(
            "leaderboard_id", "gpu", "user_id", name=op.f("uq_bestscore_leaderboard_id_gpu_user_id")
        ),
    )
    with op.batch_alter_table("bestscore", schema=None) as batch_op:
        batch_op.create_index(
            "ix_bestscore_ranking",
            ["leaderboard_id", "gpu", "score", "submitted_at", "user_id"],
            unique=False,
        )
        batch_op.create_index(batch_op.f("ix_bestscore_run_id"), ["run_id"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_bestscore_submission_id"), ["submission_id"], unique=False
        )



def downgrade() -> None:
    with op.batch_alter_table("bestscore", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_bestscore_submission_id"))
        batch_op.drop_index(batch_op.f("ix_bestscore_run_id"))
        batch_op.drop_index("ix_bestscore_ranking")

    op.drop_table("bestscore")
    with op.batch_alter_table("run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_run_submission_id"))
        batch_op.drop_index(batch_op.f("ix_run_job_id"))
        batch_op.drop_index("ix_run_board_gpu_user")

    op.drop_table("run")
    with op.batch_alter_table("job", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_submission_id"))
        batch_op.drop_index("ix_job_status_runner")

    op.drop_table("job")
    with op.batch_alter_table("submission", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submission_user_id"))
        batch_op.drop_index("ix_submission_user_created")
        batch_op.drop_index(batch_op.f("ix_submission_leaderboard_id"))
        batch_op.drop_index(batch_op.f("ix_submission_created_at"))
        batch_op.drop_index("ix_submission_board_user_created")

    op.drop_table("submission")
    op.drop_table("ratelimit")
    with op.batch_alter_table("leaderboardgpu", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_leaderboardgpu_leaderboard_id"))

    op.drop_table("leaderboardgpu")
    with op.batch_alter_table("leaderboardfile", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_leaderboardfile_leaderboard_id"))

    op.drop_table("leaderboardfile")
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_leaderboard_name"))

    op.drop_table("leaderboard")
    with op.batch_alter_table("user", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_user_identity"))
        batch_op.drop_index(batch_op.f("ix_user_banned"))

    op.drop_table("user")
    op.drop_table("setting")
    op.drop_table("code")
