"""Real databases for every test folder: SQLite (a file per test) and PostgreSQL (a database
per test session, emptied before each test).

``engine`` runs a test once per database. PostgreSQL comes from ``KERNELCUP_TEST_POSTGRES_URL``
(default: the server on 127.0.0.1:5432); when it cannot be reached its tests are skipped with
the reason, except under ``CI``, where that fails: CI must test what production runs.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import make_url, text
from sqlalchemy.engine import Engine

from kernelcup.core.errors import StoreUnavailable
from kernelcup.core.store.db import check_reachable, make_engine, upgrade

POSTGRES_ADMIN_URL = os.environ.get(
    "KERNELCUP_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
DATABASES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def _create_database(name: str) -> str:
    admin = make_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return make_url(POSTGRES_ADMIN_URL).set(database=name).render_as_string(hide_password=False)


def _drop_database(name: str) -> None:
    admin = make_engine(POSTGRES_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def _unique_name(kind: str) -> str:
    return f"kc_{kind}_{os.getpid()}_{secrets.token_hex(4)}"


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """The server's maintenance database; skips (or fails under CI) when unreachable."""
    try:
        check_reachable(POSTGRES_ADMIN_URL, timeout_s=3)
    except StoreUnavailable as error:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL tests: {error}")
        pytest.skip(f"PostgreSQL not available: {error}")
    return POSTGRES_ADMIN_URL


@pytest.fixture(scope="session")
def postgres_url(postgres_admin_url: str) -> Iterator[str]:
    """A database of this test session, migrated to head, dropped at the end."""
    name = _unique_name("test")
    url = _create_database(name)
    try:
        upgrade(url)
        yield url
    finally:
        _drop_database(name)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One migrated SQLite file per session; each test gets a copy, cheaper than migrating."""
    path = tmp_path_factory.mktemp("sqlite-template") / "kernelcup.db"
    upgrade(f"sqlite:///{path}")  # its engine is disposed, so the WAL is folded into the file
    return path


def _empty_postgres(url: str) -> None:
    """TRUNCATE every table but Alembic's, whoever created it (APScheduler's too)."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            connection.execute(text("SET LOCAL lock_timeout = '10s'"))  # a leak fails, not hangs
            tables = connection.execute(
                text(
                    "SELECT quote_ident(tablename) FROM pg_tables"
                    " WHERE schemaname = current_schema() AND tablename <> 'alembic_version'"
                )
            ).scalars().all()
            if tables:
                connection.execute(
                    text(f"TRUNCATE TABLE {', '.join(tables)} RESTART IDENTITY CASCADE")
                )
    finally:
        engine.dispose()


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database with no rows: a fresh SQLite file, or the session's PostgreSQL
    database emptied (much cheaper than a database per test)."""
    if request.param == "sqlite":
        path = tmp_path / "kernelcup.db"
        shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        path.chmod(0o600)  # as kernelcup creates it: a start refuses a database others can read
        return f"sqlite:///{path}"
    url: str = request.getfixturevalue("postgres_url")
    _empty_postgres(url)
    return url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on ``database_url``; disposed after the test so no connection outlives it."""
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture(params=DATABASES)
def blank_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no tables at all, for migration tests: a new file, or a new database."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'blank.db'}"
        return
    request.getfixturevalue("postgres_admin_url")
    name = _unique_name("blank")
    url = _create_database(name)
    try:
        yield url
    finally:
        _drop_database(name)
