"""Databases for the pipeline tests: a real SQLite file per test, and a fresh PostgreSQL database
for the claim race (skipped with a reason when the server is not there)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from core.db import make_engine

PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def create_schema(engine: Engine) -> None:
    try:
        from core.db import upgrade  # the store's migrations, once they exist
    except ImportError:
        SQLModel.metadata.create_all(engine)
    else:
        upgrade(engine)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "kernelcup.db"


@pytest.fixture
def sqlite_engine(db_path: Path) -> Iterator[Engine]:
    engine = make_engine(f"sqlite:///{db_path}")
    create_schema(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    admin = make_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = f"kc_pipeline_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(f"CREATE DATABASE {name}")
    except Exception as exc:
        admin.dispose()
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not available: {exc}")
    engine = make_engine(PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}")
    try:
        create_schema(engine)
        yield engine
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.exec_driver_sql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.dispose()
