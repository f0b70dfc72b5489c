"""Runs and ranking entries keep their score's noise range (ties within noise in `show`).

The range is the score computed from every benchmark's 95% interval low and high
(``kernelcup.harness.scoring.noise_range``). Runs stored before this revision have none (NULL): they rank
as before, never tied.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25 07:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_TABLES = ("run", "bestscore")
_COLUMNS = ("score_low", "score_high")


def upgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in _COLUMNS:
                batch_op.add_column(sa.Column(column, sa.Float(), nullable=True))


def downgrade() -> None:
    for table in _TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            for column in _COLUMNS:
                batch_op.drop_column(column)
