"""The schedule's state: leaderboard steps claimed once, reminders sent, final standings.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 20:10:34.774239
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401, RUF100  (autogenerate renders AutoString)
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "remindersent",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("before_s", sa.Integer(), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_remindersent_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_remindersent")),
        sa.UniqueConstraint(
            "leaderboard_id",
            "deadline",
            "before_s",
            name=op.f("uq_remindersent_leaderboard_id_deadline_before_s"),
        ),
    )
    op.create_table(
        "finalrun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("entry_submission_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("rank_before", sa.Integer(), nullable=False),
        sa.Column("score_before", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["entry_submission_id"],
            ["submission.id"],
            name=op.f("fk_finalrun_entry_submission_id_submission"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_finalrun_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name=op.f("fk_finalrun_submission_id_submission"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], name=op.f("fk_finalrun_user_id_user")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_finalrun")),
        sa.UniqueConstraint("submission_id", name=op.f("uq_finalrun_submission_id")),
    )
    with op.batch_alter_table("finalrun", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_finalrun_entry_submission_id"), ["entry_submission_id"], unique=False
        )
        batch_op.create_index(
            batch_op.f("ix_finalrun_leaderboard_id"), ["leaderboard_id"], unique=False
        )

    op.create_table(
        "finalstanding",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("gpu", sqlmodel.sql.sqltypes.AutoString(length=50), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=True),
        sa.Column("tied", sa.Boolean(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("score_low", sa.Float(), nullable=True),
        sa.Column("score_high", sa.Float(), nullable=True),
        sa.Column("rank_before", sa.Integer(), nullable=False),
        sa.Column("note", sa.Text(), server_default="", nullable=False),
        sa.ForeignKeyConstraint(
            ["leaderboard_id"],
            ["leaderboard.id"],
            name=op.f("fk_finalstanding_leaderboard_id_leaderboard"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name=op.f("fk_finalstanding_submission_id_submission"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["user.id"], name=op.f("fk_finalstanding_user_id_user")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_finalstanding")),
        sa.UniqueConstraint(
            "leaderboard_id",
            "gpu",
            "user_id",
            name=op.f("uq_finalstanding_leaderboard_id_gpu_user_id"),
        ),
    )
    with op.batch_alter_table("finalstanding", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_finalstanding_submission_id"), ["submission_id"], unique=False
        )

    # Nullable: each is set once by the scheduler's claim, so no server default is needed.
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("opened_announced_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("final_queued_at", sa.DateTime(timezone=True), nullable=True)
        )
        batch_op.add_column(sa.Column("final_done_at", sa.DateTime(timezone=True), nullable=True))
    # Leaderboards that existed before the scheduler are not news: no "opened" announcement.
    op.execute(sa.text("UPDATE leaderboard SET opened_announced_at = created_at"))


def downgrade() -> None:
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.drop_column("final_done_at")
        batch_op.drop_column("final_queued_at")
        batch_op.drop_column("closed_at")
        batch_op.drop_column("opened_announced_at")

    with op.batch_alter_table("finalstanding", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_finalstanding_submission_id"))
    op.drop_table("finalstanding")
    with op.batch_alter_table("finalrun", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_finalrun_leaderboard_id"))
        batch_op.drop_index(batch_op.f("ix_finalrun_entry_submission_id"))
    op.drop_table("finalrun")
    op.drop_table("remindersent")
