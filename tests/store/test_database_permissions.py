"""The SQLite database is the bot user's alone: created 0600 in a 0700 folder, and every start
(``kernelcup serve``, the embedded CLI, ``db upgrade``) refuses one that other users could read
(``mode & 0o077`` on the file or a ``-wal``/``-shm``/``-journal`` beside it) or change (``mode &
0o022`` on its folder, or another owner), naming the path and the chmod that fixes it.

What is checked is the file system as it is (``stat``), so each test sets the mode it means with
``chmod`` after creation, whatever the umask.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcup.core.errors import SetupError
from kernelcup.core.store.db import check_reachable, make_engine, upgrade

ROOT = Path(__file__).resolve().parents[2]
KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]
NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def database(tmp_path: Path) -> Path:
    """A migrated database in a folder of its own, as kernelcup creates them."""
    path = tmp_path / "db" / "kernelcup.db"
    upgrade(f"sqlite:///{path}")
    return path


def refusal(path: Path) -> SetupError:
    with pytest.raises(SetupError) as caught:
        check_reachable(f"sqlite:///{path}")
    return caught.value


@pytest.fixture
def open_umask() -> Iterator[None]:
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


def test_a_new_database_and_its_folder_are_created_private_whatever_the_umask(tmp_path: Path, open_umask: None) -> None:
    path = tmp_path / "new" / "kernelcup.db"
    check_reachable(f"sqlite:///{path}")
    assert mode(path.parent) == 0o700 and mode(path) == 0o600
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as connection:  # WAL mode: SQLite makes -wal and -shm with the file's mode
            connection.exec_driver_sql("CREATE TABLE probe (x INTEGER)")
            connection.commit()
            assert mode(path.with_name("kernelcup.db-wal")) == mode(path.with_name("kernelcup.db-shm")) == 0o600
    finally:
        engine.dispose()


def test_a_private_database_and_folder_are_reachable(database: Path) -> None:
    assert mode(database) == 0o600 and mode(database.parent) == 0o700
    check_reachable(f"sqlite:///{database}")


@pytest.mark.parametrize("folder_mode", [0o755, 0o750, 0o711])
def test_a_folder_others_may_read_but_not_write_is_accepted(database: Path, folder_mode: int) -> None:
    database.parent.chmod(folder_mode)
    try:
        check_reachable(f"sqlite:///{database}")
    finally:
        database.parent.chmod(0o700)


@pytest.mark.parametrize("file_mode", [0o644, 0o640, 0o604, 0o660, 0o606, 0o610])
def test_a_database_file_with_any_bit_for_others_is_refused_with_the_chmod(database: Path, file_mode: int) -> None:
    database.chmod(file_mode)
    refused = refusal(database)
    assert f"{database} has mode {file_mode:04o}" in refused.message
    assert f"chmod 600 {database}" in refused.hint


@pytest.mark.parametrize(("folder_mode", "fix"), [(0o777, "755"), (0o775, "755"), (0o757, "755"),
                                                   (0o770, "750"), (0o1777, "1755")])
def test_a_folder_others_may_write_is_refused_even_sticky(database: Path, folder_mode: int, fix: str) -> None:
    """Sticky (/tmp's 1777) only stops others removing names; they may still create the -wal
    file SQLite would read beside the database."""
    database.parent.chmod(folder_mode)
    try:
        refused = refusal(database)
    finally:
        database.parent.chmod(0o700)
    assert f"{database.parent} has mode {folder_mode:04o}" in refused.message
    assert f"chmod {fix} {database.parent}" in refused.hint


def test_a_leftover_wal_file_others_may_read_is_refused(database: Path) -> None:
    wal = database.with_name("kernelcup.db-wal")
    wal.touch(mode=0o600)
    wal.chmod(0o644)
    refused = refusal(database)
    assert f"{wal} has mode 0644" in refused.message and f"chmod 600 {wal}" in refused.hint


def test_a_link_in_a_folder_others_may_write_is_refused(database: Path, tmp_path: Path) -> None:
    """Whoever may write the link's folder may point the link elsewhere."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "kernelcup.db").symlink_to(database)
    refused = refusal(shared / "kernelcup.db")
    assert f"{shared} has mode 0777" in refused.message


@needs_root
def test_a_database_file_or_folder_of_another_user_is_refused(database: Path) -> None:
    os.chown(database, NOBODY, NOBODY)
    assert f"{database} belongs to uid {NOBODY}" in refusal(database).message
    os.chown(database, 0, 0)
    os.chown(database.parent, NOBODY, NOBODY)
    assert f"{database.parent} belongs to uid {NOBODY}" in refusal(database).message


@pytest.mark.postgres
def test_a_postgresql_url_is_not_checked_for_files(
    postgres_admin_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = tmp_path / "shared"
    (shared / "var").mkdir(parents=True)
    for folder in (shared, shared / "var"):
        folder.chmod(0o777)
    monkeypatch.chdir(shared)
    check_reachable(postgres_admin_url)


# --- the real commands ---------------------------------------------------------------------


def kernelcup(tmp_path: Path, path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERNELCUP_DATABASE_URL": f"sqlite:///{path}", "COLUMNS": "400",
           "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"), "KERNELCUP_WEB__ENABLED": "false"}
    return subprocess.run([*KERNELCUP, *args], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=240)


@pytest.mark.parametrize(("target", "bad_mode", "fix"), [("file", 0o644, "600"), ("folder", 0o777, "755")])
def test_the_cli_serve_and_db_upgrade_exit_non_zero_naming_the_path_and_the_chmod(
    tmp_path: Path, database: Path, target: str, bad_mode: int, fix: str,
) -> None:
    exposed = database if target == "file" else database.parent
    exposed.chmod(bad_mode)
    for command in (["list"], ["serve", "--no-console"], ["db", "upgrade"]):
        done = kernelcup(tmp_path, database, *command)
        assert done.returncode == 4, (command, done.stdout, done.stderr)
        assert f"{exposed} has mode {bad_mode:04o}" in done.stderr and f"chmod {fix} {exposed}" in done.stderr
        assert "Traceback" not in done.stderr
    exposed.chmod(0o600 if target == "file" else 0o700)  # the fix it names
    listed = kernelcup(tmp_path, database, "list")
    assert listed.returncode == 0 and "vectoradd" in listed.stdout, listed.stdout + listed.stderr


def test_a_fresh_start_creates_a_private_database_and_works(tmp_path: Path) -> None:
    path = tmp_path / "var" / "kernelcup.db"  # where the CLI keeps its log too
    listed = kernelcup(tmp_path, path, "list")
    assert listed.returncode == 0 and "vectoradd" in listed.stdout, listed.stdout + listed.stderr
    assert mode(path) == 0o600 and mode(path.parent) == 0o700
