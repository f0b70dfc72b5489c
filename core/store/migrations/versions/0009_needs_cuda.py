"""Leaderboards know whether they need a CUDA GPU (``kernelcup.core.leaderboards.devices``), so ``list``
says where each runs and ``submit`` refuses the CPU for one that cannot run there.

Leaderboards stored before this revision: ``lang: cu`` ones need CUDA; a Python one whose inputs
are made on "cuda" is found by the next ``admin sync`` of its folder.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-28 06:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.add_column(sa.Column("needs_cuda", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute(sa.text("UPDATE leaderboard SET needs_cuda = :yes WHERE lang = 'cu'").bindparams(yes=True))


def downgrade() -> None:
    with op.batch_alter_table("leaderboard", schema=None) as batch_op:
        batch_op.drop_column("needs_cuda")
