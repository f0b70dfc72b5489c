"""Submissions remember whether their final report was delivered in chat (kernelcup.core.pipeline.delivery).

Every submission that had already finished is marked delivered, when its last job ended: the
bot delivered those live before this revision, and a chat adapter would otherwise post every
old report again at its next start. Unfinished ones stay NULL, so they are followed again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401, RUF100  (autogenerate renders AutoString)
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_MARK_FINISHED_DELIVERED = sa.text(
    """
    UPDATE submission
    SET delivered_at = COALESCE(
        (SELECT MAX(job.finished_at) FROM job WHERE job.submission_id = submission.id),
        submission.created_at)
    WHERE delivered_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM job WHERE job.submission_id = submission.id
                      AND job.status IN ('queued', 'running'))
    """
)


def upgrade() -> None:
    with op.batch_alter_table("submission", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submission_delivered_at"), ["delivered_at"], unique=False)
    op.execute(_MARK_FINISHED_DELIVERED)


def downgrade() -> None:
    with op.batch_alter_table("submission", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_submission_delivered_at"))
