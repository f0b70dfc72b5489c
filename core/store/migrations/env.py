"""Alembic environment. ``kernelcup.core.store.db.upgrade`` hands in a connection it has already locked and
opened a transaction on; the ``alembic`` command line (``-x url=...``) gets one of its own."""

from __future__ import annotations

import os
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import kernelcup.core.store.models  # noqa: F401  (registers the tables on SQLModel.metadata)
from kernelcup.core.store.db import UTCDateTime, make_engine

config = context.config
target_metadata = SQLModel.metadata


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Migrations describe the schema only: UTCDateTime's Python-side checks are not schema, and
    a revision must not break when that class moves or changes."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _options() -> dict[str, Any]:
    return {
        "target_metadata": target_metadata,
        "render_as_batch": True,  # SQLite cannot ALTER most things; batch rebuilds the table
        "compare_type": True,
        "render_item": render_item,
    }


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get(
        "KERNELCUP_DATABASE_URL"
    )
    if not url:
        raise SystemExit("give the database: alembic -x url=... or KERNELCUP_DATABASE_URL")
    return url


def _run(connection: Connection) -> None:
    context.configure(connection=connection, **_options())
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    context.configure(url=_url(), literal_binds=True, **_options())
    with context.begin_transaction():
        context.run_migrations()
elif (given := config.attributes.get("connection")) is not None:
    _run(given)
else:
    engine = make_engine(_url())
    try:
        with engine.begin() as connection:
            _run(connection)
    finally:
        engine.dispose()
