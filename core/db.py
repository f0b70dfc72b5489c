"""The database engine: SQLite (a file, WAL) by default, PostgreSQL when the URL says so."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session, create_engine


def make_engine(url: str, **kwargs: Any) -> Engine:
    if url.startswith("sqlite"):
        _ensure_sqlite_dir(url)
        # Without a busy timeout, concurrent writers fail at once with "database is locked".
        engine = create_engine(url, connect_args={"timeout": 5, "check_same_thread": False}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _ensure_sqlite_dir(url: str) -> None:
    path = url.split(":///", 1)[-1]
    if path and path != ":memory:" and not path.startswith("file:"):
        Path(path).parent.mkdir(parents=True, exist_ok=True)


@contextmanager
def session_scope(engine: Engine) -> Iterator[Session]:
    """One transaction: committed when the block ends, rolled back when it raises."""
    with Session(engine, expire_on_commit=False) as session:
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise


def as_utc(value: datetime) -> datetime:
    """SQLite drops a datetime's zone; everything stored is UTC, so re-attach it."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
