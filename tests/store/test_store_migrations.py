"""The schema comes only from the migrations, and they describe exactly the models."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

import kernelcup.core.store.models  # noqa: F401  (the tables to compare with)
from kernelcup.core.errors import StoreUnavailable
from kernelcup.core.store.db import (
    MIGRATIONS_DIR,
    alembic_config,
    check_reachable,
    current_revision,
    ensure_schema,
    head_revision,
    make_engine,
    upgrade,
)

HEAD = ScriptDirectory.from_config(alembic_config()).get_current_head()


def _differences(engine: Engine) -> list[Any]:
    # SQLite reflects a server default as SQL text ("''") that never equals the model's "";
    # types and everything else are compared on both.
    defaults = engine.dialect.name == "postgresql"
    with engine.connect() as connection:
        context = MigrationContext.configure(
            connection, opts={"compare_type": True, "compare_server_default": defaults}
        )
        return list(compare_metadata(context, SQLModel.metadata))


def test_there_is_one_head_and_the_template_imports_sqlmodel() -> None:
    assert ScriptDirectory.from_config(alembic_config()).get_heads() == [HEAD]
    assert "import sqlmodel" in (MIGRATIONS_DIR / "script.py.mako").read_text()


def test_a_blank_database_has_no_revision(blank_database_url: str) -> None:
    engine = make_engine(blank_database_url)
    try:
        assert current_revision(engine) is None
    finally:
        engine.dispose()


def test_upgrade_reaches_head_and_matches_the_models(blank_database_url: str) -> None:
    upgrade(blank_database_url)
    engine = make_engine(blank_database_url)
    try:
        assert current_revision(engine) == HEAD
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_upgrade_again_changes_nothing(engine: Engine) -> None:
    before = sorted(inspect(engine).get_table_names())
    upgrade(engine)
    upgrade(engine.url)
    assert current_revision(engine) == HEAD
    assert sorted(inspect(engine).get_table_names()) == before


def test_the_newest_migration_read_from_the_files_is_alembics_head() -> None:
    assert head_revision() == HEAD


def test_a_start_migrates_a_database_that_is_behind_and_only_reads_the_stamp_of_a_current_one(
    blank_database_url: str,
) -> None:
    engine = make_engine(blank_database_url)
    try:
        assert ensure_schema(engine) is True  # new
        assert current_revision(engine) == HEAD
        assert ensure_schema(engine) is False  # current: one query, no Alembic
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0001")
        assert ensure_schema(engine) is True  # behind
        assert current_revision(engine) == HEAD and _differences(engine) == []
    finally:
        engine.dispose()


def test_processes_starting_together_migrate_once(blank_database_url: str) -> None:
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def migrate() -> None:
        try:
            start.wait()
            upgrade(blank_database_url)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "an upgrade hung"
    assert errors == []
    engine = make_engine(blank_database_url)
    try:
        assert current_revision(engine) == HEAD
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_downgrade_to_base_and_back(blank_database_url: str) -> None:
    upgrade(blank_database_url)
    engine = make_engine(blank_database_url)
    try:
        with engine.begin() as connection:
            command.downgrade(alembic_config(connection), "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(engine)
        assert _differences(engine) == []
    finally:
        engine.dispose()


def test_check_reachable_passes_on_a_live_database(database_url: str) -> None:
    check_reachable(database_url)


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        check_reachable("postgresql+psycopg://kc:s3cret@127.0.0.1:1/kernelcup")
    message = str(caught.value)
    assert message == (
        "cannot reach the database at postgresql+psycopg://kc:***@127.0.0.1:1/kernelcup:"
        " connection refused"
    )


def test_a_bare_postgres_url_gets_the_shipped_driver() -> None:
    with pytest.raises(StoreUnavailable, match=r"^cannot reach the database at "
                       r"postgresql\+psycopg://kc:\*\*\*@127\.0\.0\.1:1/kernelcup: "):
        check_reachable("postgres://kc:s3cret@127.0.0.1:1/kernelcup")


def test_an_unreadable_url_is_refused_without_echoing_it() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        check_reachable("not a url:s3cret")
    assert "s3cret" not in str(caught.value)


def test_a_sqlite_file_in_a_new_folder_is_reachable(tmp_path: Path) -> None:
    check_reachable(f"sqlite:///{tmp_path / 'fresh' / 'kernelcup.db'}")
    assert (tmp_path / "fresh").is_dir()


def test_an_uncreatable_sqlite_folder_is_one_line() -> None:
    with pytest.raises(StoreUnavailable) as caught:
        check_reachable("sqlite:////proc/kernelcup/nowhere.db")
    assert str(caught.value) == (
        "cannot reach the database at sqlite:////proc/kernelcup/nowhere.db:"
        " cannot create its folder: no such file or directory"
    )


def test_an_unopenable_sqlite_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "taken.db").mkdir()  # a folder where the file should be
    with pytest.raises(StoreUnavailable) as caught:
        check_reachable(f"sqlite:///{tmp_path / 'taken.db'}")
    assert str(caught.value) == (
        f"cannot reach the database at sqlite:///{tmp_path / 'taken.db'}:"
        " unable to open database file"
    )
