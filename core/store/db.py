"""The database engine: SQLite (a file, WAL) by default, PostgreSQL when the URL says so.

Also the one way the schema changes (``upgrade``, Alembic from the first table on) and the one
datetime column type, so every timestamp that leaves the store is tz-aware UTC on both databases.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import DateTime, event, make_url, text
from sqlalchemy.engine import URL, Connection, Dialect, Engine
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool
from sqlalchemy.types import TypeDecorator
from sqlmodel import Session, create_engine

from kernelcup.core.errors import SetupError, StoreUnavailable
from kernelcup.core.store.sqlite_file import create_private, refuse_exposed

if TYPE_CHECKING:  # Alembic is imported only to migrate: a start on a current schema never needs it
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Any constant works; it only has to be the same in every process that migrates this database.
_MIGRATION_LOCK_KEY = 0x6B635F6D69677261  # "kc_migra"


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC, returns tz-aware UTC: timestamptz on PostgreSQL, naive-UTC text on SQLite.

    A naive datetime is refused rather than guessed at: a deadline without a zone is a bug, and
    silently treating it as UTC would shift it by the server's offset wherever that differs.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}: {value!r}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: give it a time zone")
        value = value.astimezone(UTC)
        # SQLite keeps no zone; storing the UTC wall time keeps text order = time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def database_url(url: str | URL) -> URL:
    """Parse, and give bare ``postgresql://`` / ``postgres://`` URLs the driver we ship
    (psycopg 3): SQLAlchemy would otherwise look for psycopg2, which is not installed."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def make_engine(url: str | URL, **kwargs: Any) -> Engine:
    url = database_url(url)
    if url.get_backend_name() == "sqlite":
        _ensure_sqlite_dir(url)
        # Without a busy timeout, concurrent writers fail at once with "database is locked".
        connect_args = {"timeout": 5, "check_same_thread": False}
        engine = _create_engine(url, connect_args=connect_args, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return _create_engine(url, pool_pre_ping=True, **kwargs)


def _create_engine(url: URL, **kwargs: Any) -> Engine:
    """``create_engine``, with a database driver that is not installed as the operator's to fix."""
    try:
        return create_engine(url, **kwargs)
    except ModuleNotFoundError as exc:
        extra = "kernelcup[postgres]" if url.get_backend_name() == "postgresql" else exc.name
        raise SetupError(f"The database {url.render_as_string(hide_password=True)} needs the package "
                         f"{exc.name}, which is not installed.", f"pip install '{extra}'") from None


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    _set_wal(cursor)
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _is_file_database(url: URL) -> bool:
    path = url.database or ""
    return bool(path) and path != ":memory:" and not path.startswith("file:")


def _ensure_sqlite_dir(url: URL) -> None:
    """A missing folder is created 0700 and a missing file 0600 (core/store/sqlite_file.py)."""
    if _is_file_database(url):
        create_private(Path(url.database or ""))


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


T = TypeVar("T")
_RETRYABLE_SQLSTATES = {"40P01", "40001"}  # deadlock detected, serialization failure


def in_transaction(engine: Engine, work: Callable[[Session], T], attempts: int = 3) -> T:
    """Run ``work`` in one transaction, again when PostgreSQL aborts it to break a deadlock.

    A cascade delete (a leaderboard and everything under it) takes row locks in the opposite
    order from a worker storing a run, so the two can deadlock; the victim's work is simply
    done again once the other side has committed.
    """
    for attempt in range(1, attempts + 1):
        try:
            with session_scope(engine) as session:
                return work(session)
        except DBAPIError as exc:
            if attempt == attempts or getattr(exc.orig, "sqlstate", None) not in _RETRYABLE_SQLSTATES:
                raise
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def as_utc(value: datetime) -> datetime:
    """For datetimes from outside the store (user input, files): anything naive is taken as UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# --- reachability ---------------------------------------------------------------------------


def check_reachable(url: str | URL, timeout_s: int = 5) -> None:
    """Fail at start with one line that names the database, instead of a traceback mid-request."""
    try:
        parsed = database_url(url)
    except ArgumentError:
        raise StoreUnavailable("cannot read the database URL (it is not shown: it may hold a"
                               " password)") from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite":
        try:
            _ensure_sqlite_dir(parsed)  # as make_engine will: a fresh install has no folder yet
        except OSError as error:
            reason = f"cannot create its folder: {(error.strerror or str(error)).lower()}"
            raise StoreUnavailable(f"cannot reach the database at {shown}: {reason}") from None
        if _is_file_database(parsed):
            refuse_exposed(Path(parsed.database or ""))  # every start passes here: serve, the CLI, db upgrade
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args["connect_timeout"] = timeout_s
    engine = _create_engine(parsed, poolclass=NullPool, connect_args=connect_args)
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except SQLAlchemyError as error:
        reason = _one_line_reason(error, parsed.password)
        raise StoreUnavailable(f"cannot reach the database at {shown}: {reason}") from None
    finally:
        engine.dispose()


def _one_line_reason(error: SQLAlchemyError, password: str | None) -> str:
    original = error.orig if isinstance(error, DBAPIError) else error
    lines = [line.strip() for line in str(original).splitlines() if line.strip()]
    # psycopg says 'connection failed: connection to server at "h", port 1 failed: Connection
    # refused'; the part after the last ": " is the reason, the rest repeats the address.
    reason = (lines[0] if lines else type(original).__name__).rsplit(": ", 1)[-1].strip()
    if password:
        reason = reason.replace(password, "***")
    return reason[:1].lower() + reason[1:]


# --- migrations -----------------------------------------------------------------------------


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic configured in code, so an installed package migrates without an alembic.ini."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine_or_url: Engine | str | URL, revision: str = "head") -> None:
    """Bring the schema to ``revision``; a no-op when already there, so call it at every start.

    Safe when several processes start at once: on PostgreSQL a transaction-scoped advisory lock
    makes the others wait and then find nothing to do; on SQLite ``BEGIN IMMEDIATE`` does the
    same. The whole upgrade is one transaction on both, so a failed migration leaves nothing
    half-done. A start that only needs the schema current calls :func:`ensure_schema`, which
    skips all of this when the database's stamp already names the newest migration.
    """
    from alembic import command

    if isinstance(engine_or_url, Engine):
        given: Engine | None = engine_or_url
        url = engine_or_url.url
    else:
        given, url = None, database_url(engine_or_url)
    if url.get_backend_name() == "sqlite" and _is_file_database(url):
        _upgrade_sqlite_file(url, revision)
        return
    if given is None and url.get_backend_name() == "sqlite":
        raise ValueError("pass an in-memory SQLite database as its engine, not as a URL")
    engine = given or make_engine(url, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY}
                )
            command.upgrade(alembic_config(connection), revision)
    finally:
        if given is None:
            engine.dispose()


def _upgrade_sqlite_file(url: URL, revision: str) -> None:
    """Migrate on a connection of its own, with foreign keys off.

    Batch migrations rebuild a table by copying and dropping it; with foreign keys on, dropping
    ``leaderboard`` would cascade-delete every submission. So, as SQLite's docs prescribe for
    schema changes: keys off, one transaction, then ``foreign_key_check`` before committing.
    """
    _ensure_sqlite_dir(url)
    engine = create_engine(url, poolclass=NullPool, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # so that the BEGIN below is the only one
        cursor = dbapi_connection.cursor()
        _set_wal(cursor)
        cursor.execute("PRAGMA foreign_keys=OFF")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    from alembic import command

    try:
        with engine.begin() as connection:
            command.upgrade(alembic_config(connection), revision)
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise RuntimeError(f"migration left rows with broken foreign keys: {broken[:5]}")
    finally:
        engine.dispose()


def _set_wal(cursor: Any, wait_s: float = 30.0) -> None:
    """``PRAGMA journal_mode=WAL``, waiting while another process holds the write lock.

    On a new database file the switch needs that lock and SQLite's busy handler does not wait
    for it, so processes starting together retry here (a no-op once the file is in WAL mode).
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def current_revision(engine: Engine) -> str | None:
    """The schema's Alembic revision, or None for a database never migrated."""
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


_REVISION_LINE = re.compile(r"""^(down_revision|revision)\s*(?::[^=]*)?=\s*(?:"([^"]*)"|'([^']*)'|None)""",
                            re.MULTILINE)


def head_revision(versions: Path = MIGRATIONS_DIR / "versions") -> str | None:
    """The newest migration's revision, read from the migration files' ``revision`` and
    ``down_revision`` lines without importing Alembic; None when that is not one clear head
    (then :func:`ensure_schema` leaves the decision to Alembic)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in versions.glob("*.py"):
        found = {name: a or b for name, a, b in _REVISION_LINE.findall(path.read_text(encoding="utf-8"))}
        if found.get("revision"):
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(found["down_revision"])
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def stamped_revision(engine: Engine) -> str | None:
    """The revision in the database's ``alembic_version`` table; None when there is none (a fresh
    database) or the table holds more than one row (branches: Alembic's to sort out)."""
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT version_num FROM alembic_version")).fetchall()
    except SQLAlchemyError:
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def ensure_schema(engine: Engine) -> bool:
    """Bring the schema to the newest migration, the cheap way when it is there already: one
    query compares the database's stamp with the newest migration file, and only a database
    that is behind (or new, or that this check cannot read) runs :func:`upgrade`. True when an
    upgrade ran. Every start of the terminal commands and the bot goes through here."""
    head = head_revision()
    if head is not None and stamped_revision(engine) == head:
        return False
    upgrade(engine)
    return True
