"""The scheduler keeps no jobs in the database any more: its table goes.

APScheduler's SQL job store unpickled whatever its table held, so anything that could write
that table could run code in the bot. The schedule is derived from the leaderboard rows alone
(kernelcup.core.scheduling.scheduler), in each process's memory.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 01:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if sa.inspect(op.get_bind()).has_table("apscheduler_jobs"):
        op.drop_table("apscheduler_jobs")


def downgrade() -> None:
    """Nothing to restore: the schedule is rebuilt from the leaderboards at start."""
