"""Queued jobs take turns across users (kernelcup.core.pipeline.fairness): each job gets a turn, and runners take
them by (turn, id) instead of by id alone. Jobs already queued keep their order (turn 0).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25 07:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("job", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turn", sa.Integer(), nullable=False, server_default="0"))
        batch_op.drop_index("ix_job_status_runner")
        batch_op.create_index("ix_job_queue_order", ["status", "runner", "turn", "id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("job", schema=None) as batch_op:
        batch_op.drop_index("ix_job_queue_order")
        batch_op.create_index("ix_job_status_runner", ["status", "runner", "id"], unique=False)
        batch_op.drop_column("turn")
