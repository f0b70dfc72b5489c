"""The ``kernelcup`` command as a script uses it: a real process on a real database."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from kernelcup.adapters.terminal.cli import handle_request
from kernelcup.adapters.terminal.render import TerminalRenderer
from kernelcup.adapters.terminal.session import open_app, terminal_actor
from kernelcup.core.config import load_settings
from kernelcup.core.messages import Attachment, Request
from kernelcup.runners.local import LocalRunner

ROOT = Path(__file__).resolve().parents[2]
KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]


def kernelcup(tmp_path: Path, *args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "KERNELCUP_DATABASE_URL": f"sqlite:///{tmp_path}/kernelcup.db",
        "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"),
        "KERNELCUP_USER": "tester",
        "COLUMNS": "200",
        **env,
    }
    return subprocess.run([*KERNELCUP, *args], cwd=tmp_path, env=environ, input=stdin, text=True,
                          capture_output=True, timeout=240)


def test_list_on_a_fresh_install_shows_the_shipped_leaderboards(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "list")
    assert done.returncode == 0, done.stderr
    for name in ("identity", "vectoradd", "matmul"):
        assert name in done.stdout


def test_submit_exits_zero_only_when_every_job_passed(tmp_path: Path) -> None:
    good = kernelcup(tmp_path, "submit", "test", str(ROOT / "leaderboards/identity/solutions/pytorch.py"))
    assert good.returncode == 0, good.stdout + good.stderr
    assert "✅" in good.stdout and "tests passed" in good.stdout
    bad = kernelcup(tmp_path, "submit", "test", str(ROOT / "leaderboards/identity/solutions/wrong_offbyone.py"))
    assert bad.returncode == 1
    assert "❌" in bad.stdout


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "submit", "test", "nowhere.py")
    assert done.returncode == 1
    assert "There is no file nowhere.py" in done.stderr


def test_an_unreachable_database_is_one_line_without_the_password(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "list",
                     KERNELCUP_DATABASE_URL="postgresql+psycopg://kc:hunter2@127.0.0.1:1/kernelcup")
    assert done.returncode == 3
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert "127.0.0.1:1" in lines[0] and "hunter2" not in done.stderr and "Traceback" not in done.stderr


def test_console_chat_runs_the_same_slash_commands(tmp_path: Path) -> None:
    solution = ROOT / "leaderboards/identity/solutions/pytorch.py"
    script = f"/leaderboard list\n/leaderboard submit test {solution}\n/leaderboard nonsense\n"
    done = kernelcup(tmp_path, "serve", stdin=script)
    assert done.returncode == 0, done.stderr
    assert "vectoradd" in done.stdout  # the list
    assert "accepted" in done.stdout and "tests passed" in done.stdout  # followed to the end
    assert "There is no command 'nonsense'" in done.stdout


@pytest.mark.parametrize("command", ["--help", "admin --help", "submit --help"])
def test_help_is_generated_from_the_command_registry(tmp_path: Path, command: str) -> None:
    done = kernelcup(tmp_path, *command.split())
    assert done.returncode == 0
    assert "Usage" in done.stdout


@pytest.mark.parametrize(("env", "says"), [
    ({"KERNELCUP_LIMITS__MAX_FILE_BYTES": "lots"}, "limits.max_file_bytes must be a whole number, not 'lots'"),
    ({"KERNELCUP_DEFAULT_DEADLINE_DAYS": "1.5"}, "default_deadline_days must be a whole number"),
    ({"KERNELCUP_DEFAULT_DEADLINE_DAYS": "100000000"}, "default_deadline_days must be from 1 to 36500"),
    ({"KERNELCUP_LIMITS__MAX_FILEBYTES": "3"}, "There is no setting limits.max_filebytes"),
    ({"KERNELCUP_CONFIG": "/nowhere/kernelcup.yml"}, "Cannot read the config file /nowhere/kernelcup.yml"),
])
def test_a_setup_that_cannot_work_is_one_message_and_exit_4(tmp_path: Path, env: dict[str, str], says: str) -> None:
    done = kernelcup(tmp_path, "list", **env)
    assert done.returncode == 4, done.stdout + done.stderr
    assert says in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr and "╭" not in done.stderr and done.stdout == ""


def test_folders_that_no_served_gpu_can_open_are_named_in_one_line(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "list", KERNELCUP_GPUS__CPU__RUNNER="nowhere")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert said.startswith("Not loaded: allreduce, conv2d, gemm_rs, grayscale")
    assert said.count("no runner serves a GPU here") == 1
    refused = kernelcup(tmp_path, "submit", "test", str(ROOT / "leaderboards/vectoradd/solutions/pytorch.py"),
                        KERNELCUP_GPUS__CPU__RUNNER="nowhere")
    assert refused.returncode == 1
    assert "There is no leaderboard 'vectoradd'" in refused.stdout and "Traceback" not in refused.stderr


def test_an_unknown_leaderboard_is_one_message_and_exit_1(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "show", "nosuch")
    assert done.returncode == 1
    assert "There is no leaderboard 'nosuch'" in done.stdout and "Traceback" not in done.stdout + done.stderr



def test_submit_ends_the_harness_started_for_a_next_job_before_its_loop_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A harness left running past ``asyncio.run`` keeps its subprocess transport open: Python 3.12
    then prints 'Exception ignored ... Event loop is closed' at exit (3.11 stays silent)."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={"KERNELCUP_DATABASE_URL": f"sqlite:///{tmp_path}/kernelcup.db",
                                  "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"),
                                  "KERNELCUP_RUNNERS__LOCAL__STANDBY": "1"})
    app = open_app(settings, log_file=tmp_path / "kernelcup.log")
    runner = app.runners["local"]
    assert isinstance(runner, LocalRunner)
    solution = ROOT / "leaderboards/identity/solutions/pytorch.py"
    request = Request(actor=terminal_actor(), command="submit", args={"mode": "test", "file": solution.name},
                      attachments=[Attachment(solution.name, solution.read_bytes())])
    renderer = TerminalRenderer(Console(file=io.StringIO()), tmp_path / "files")
    assert asyncio.run(handle_request(app, request, renderer)) == 0
    assert runner.standby_pid is None


def test_a_command_that_needs_no_runner_never_builds_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`list` on a store that has its leaderboards imports no runner SDK and asks no nvidia-smi."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings(env={"KERNELCUP_DATABASE_URL": f"sqlite:///{tmp_path}/kernelcup.db",
                                  "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards")})
    first = open_app(settings, log_file=tmp_path / "kernelcup.log")  # a fresh store syncs: GPUs needed
    assert first.sync_if_empty() is not None

    def no_runners() -> dict[str, LocalRunner]:
        raise AssertionError("list built the runners")

    app = open_app(settings, log_file=tmp_path / "kernelcup.log", runners=no_runners)
    request = Request(actor=terminal_actor(), command="list")
    renderer = TerminalRenderer(Console(file=io.StringIO()), tmp_path / "files")
    assert asyncio.run(handle_request(app, request, renderer)) == 0
    assert "vectoradd" in renderer.console.file.getvalue()  # type: ignore[attr-defined]


def test_the_command_line_and_the_hand_off_load_without_the_store_or_torch() -> None:
    """What every command pays before it does anything, and all that a command handed to a
    running server pays: the registry, Typer and Rich; the store, Alembic, the scheduler, the
    runners and torch come with the embedded commands that use them."""
    probe = ("import sys, kernelcup.adapters.terminal.cli, kernelcup.adapters.terminal.handoff; "
             "print(' '.join(m for m in ('sqlalchemy', 'sqlmodel', 'alembic', 'apscheduler', 'torch', 'modal', "
             "'httpx', 'kernelcup.runners.local') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == []
