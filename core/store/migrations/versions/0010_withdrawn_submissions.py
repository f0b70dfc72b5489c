"""A submission can be withdrawn (``withdraw``): by its author, or by an admin with a reason. The row
stays for audit; its runs leave the rankings and the final standings.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-29 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("submission", schema=None) as batch_op:
        batch_op.add_column(sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("withdrawn_by_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("withdrawn_reason", sa.Text(), nullable=True))
        batch_op.create_foreign_key(
            batch_op.f("fk_submission_withdrawn_by_id_user"), "user", ["withdrawn_by_id"], ["id"]
        )


def downgrade() -> None:
    with op.batch_alter_table("submission", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_submission_withdrawn_by_id_user"), type_="foreignkey")
        batch_op.drop_column("withdrawn_reason")
        batch_op.drop_column("withdrawn_by_id")
        batch_op.drop_column("withdrawn_at")
