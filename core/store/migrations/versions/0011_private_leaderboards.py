"""Private leaderboards (``private``, ``join``): invite-only rounds on the same bot. A private
leaderboard is seen and entered by its members (by an invite code, or a role on its list), its
creator and admins.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-29 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401, RUF100  (autogenerate renders AutoString)
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.add_column(sa.Column("invite_code_sha256", sqlmodel.sql.sqltypes.AutoString(length=64),
                                      nullable=True))
        batch_op.add_column(sa.Column("member_roles", sa.Text(), nullable=False, server_default=""))
    op.create_table(
        "leaderboardmember",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("leaderboard_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("via", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("joined_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["leaderboard_id"], ["leaderboard.id"],
                                name=op.f("fk_leaderboardmember_leaderboard_id_leaderboard"), ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], name=op.f("fk_leaderboardmember_user_id_user"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leaderboardmember")),
        sa.UniqueConstraint("leaderboard_id", "user_id", name=op.f("uq_leaderboardmember_leaderboard_id_user_id")),
    )


def downgrade() -> None:
    op.drop_table("leaderboardmember")
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.drop_column("member_roles")
        batch_op.drop_column("invite_code_sha256")
