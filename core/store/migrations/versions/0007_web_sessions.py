"""Signed-in browsers get a server-side session (kernelcup.core.access.web_sessions): the pages' cookie holds a
random session id instead of the API token, and signing out ends the session.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 07:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel.sql.sqltypes  # noqa: F401, RUF100  (autogenerate renders AutoString)
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "websession",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("token_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["token_id"], ["apitoken.id"], name=op.f("fk_websession_token_id_apitoken"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"], name=op.f("fk_websession_user_id_user"), ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_websession")),
    )
    with op.batch_alter_table("websession", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_websession_session_sha256"), ["session_sha256"], unique=True)
        batch_op.create_index(batch_op.f("ix_websession_token_id"), ["token_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("websession", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_websession_token_id"))
        batch_op.drop_index(batch_op.f("ix_websession_session_sha256"))
    op.drop_table("websession")
