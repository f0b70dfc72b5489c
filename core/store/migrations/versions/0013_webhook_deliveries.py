"""Webhook deliveries already acted on, so that one delivered twice runs once
(kernelcup.core.store.webhooks; the GitHub adapter's X-GitHub-Delivery ids).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-29 14:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401, RUF100  (autogenerate renders AutoString)
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "webhookdelivery",
        sa.Column("source", sqlmodel.sql.sqltypes.AutoString(length=100), nullable=False),
        sa.Column("delivery_id", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("source", "delivery_id", name=op.f("pk_webhookdelivery")),
    )
    with op.batch_alter_table("webhookdelivery", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_webhookdelivery_received_at"), ["received_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("webhookdelivery", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_webhookdelivery_received_at"))
    op.drop_table("webhookdelivery")
