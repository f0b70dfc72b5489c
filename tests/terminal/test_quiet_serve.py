"""A first ``kernelcup serve`` says one summary line and announces nothing nobody asked for.

A real server process on a fresh SQLite database with the shipped leaderboards. It runs with the
console chat on (stdin a pipe held open): the console is where "Leaderboard X is open" banners
are printed, so a server without it could not show one even if it announced. Its log (stderr,
JSON lines) and its chat (stdout) are counted after it stops.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import pytest

ROOT = Path(__file__).resolve().parents[2]
KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]
# Waits are on events, never fixed sleeps; the budget only bounds a server that hangs, scaled to
# a loaded box (TESTING.md: load 15 on 2 cores).
BUDGET_S = 120 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


@pytest.fixture
def home() -> Iterator[Path]:
    # Short: the hand-off socket's path must fit in about 100 characters.
    folder = Path(tempfile.mkdtemp(prefix="kq", dir="/tmp"))
    shutil.copytree(ROOT / "leaderboards", folder / "leaderboards",
                    ignore=shutil.ignore_patterns("solutions", "__pycache__"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "KERNELCUP_DATABASE_URL": f"sqlite:///{home}/kernelcup.db",
        "KERNELCUP_LEADERBOARDS_DIR": str(home / "leaderboards"),
        "KERNELCUP_WEB__ENABLED": "false",
        "KERNELCUP_SCHEDULE__START_DELAY": "1s",
        "KERNELCUP_USER": "tester",
        "COLUMNS": "200",
        **extra,
    }
    for secret in ("MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", "GITHUB_TOKEN", "DISCORD_TOKEN", "SLACK_BOT_TOKEN"):
        env.pop(secret, None)
    return env


class Server:
    """``kernelcup serve`` with the console chat; stdout (chat) and stderr (log) in files."""

    def __init__(self, home: Path, **extra: str) -> None:
        self.home = home
        self.chat_file, self.log_file = home / "chat.out", home / "log.out"
        with self.chat_file.open("w") as chat, self.log_file.open("w") as log:
            self.process = subprocess.Popen([*KERNELCUP, "serve"], cwd=home, env=environment(home, **extra),
                                            stdin=subprocess.PIPE, stdout=chat, stderr=log)

    def chat(self) -> str:
        return self.chat_file.read_text()

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log_file.read_text().splitlines() if line.startswith("{")]

    def raw_log_lines(self) -> list[str]:
        return [line for line in self.log_file.read_text().splitlines() if line.strip() and not line.startswith("{")]

    def wait_for(self, what: str, found: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        deadline = time.monotonic() + BUDGET_S
        while True:
            match = next((event for event in self.events() if found(event)), None)
            if match is not None:
                return match
            assert self.process.poll() is None, f"serve ended before {what}:\n{self.log_file.read_text()}"
            assert time.monotonic() < deadline, f"no {what} within {BUDGET_S:.0f} s:\n{self.log_file.read_text()}"
            time.sleep(0.1)  # polling a file: the wait ends on the event, not on this

    def wait_until_scheduled(self) -> None:
        """Serving, and the scheduler's first pass (due jobs handed out, jobs rebuilt) done."""
        self.wait_for("'serving' line", lambda e: e["event"] == "serving")
        self.wait_for("scheduler's first pass", lambda e: e["event"] == "scheduler resumed")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            stdin: TextIO | Any = self.process.stdin
            stdin.close()  # the console's reader thread ends at end of input
            self.process.wait(timeout=BUDGET_S)


@pytest.fixture
def started(home: Path) -> Iterator[Callable[..., Server]]:
    servers: list[Server] = []

    def start(**extra: str) -> Server:
        servers.append(Server(home, **extra))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def opened(events: list[dict[str, Any]]) -> list[str]:
    return [e["leaderboard"] for e in events if e["event"] == "announced" and e.get("occasion") == "opened"]


def handed_off(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A terminal command of this box: the running server takes it (hand-off socket)."""
    return subprocess.run([*KERNELCUP, *args], cwd=home, env=environment(home), text=True, capture_output=True,
                          timeout=BUDGET_S)


def test_a_first_start_announces_no_leaderboard_and_says_one_summary_line(
    home: Path, started: Callable[..., Server]
) -> None:
    server = started()
    server.wait_until_scheduled()
    server.stop()
    events, chat = server.events(), server.chat()
    synced = next(e for e in events if e["event"] == "leaderboards synced")
    assert "vectoradd" in synced["created"]  # the shipped leaderboards were loaded ...
    assert "is open" not in chat and opened(events) == []  # ... and none announced
    assert server.raw_log_lines() == []  # no raw APScheduler line ("skipped: maximum number ...")
    assert not any("maximum number of running instances" in json.dumps(e) for e in events)
    assert not [e for e in events if e["level"] in ("warning", "error")], "unasked warnings at start"
    summary = [e for e in events if e["event"] == "serving"]
    assert len(summary) == 1
    assert summary[0]["adapters"] == ["console", "handoff"]
    assert summary[0]["runners"] == {"local": ["cpu"]} and summary[0]["gpus"] == ["cpu"]
    assert summary[0]["runners_off"] == {"modal": "no Modal credentials"}
    assert summary[0]["database"] == "sqlite"


def test_a_leaderboard_a_command_creates_while_serving_is_announced_once(
    home: Path, started: Callable[..., Server]
) -> None:
    # The control: the same counting sees the banner of a leaderboard that opens while serving.
    server = started()
    server.wait_until_scheduled()
    shutil.copytree(ROOT / "leaderboards/identity", home / "leaderboards/identity_late",
                    ignore=shutil.ignore_patterns("solutions", "__pycache__"))
    synced = handed_off(home, "admin", "sync")
    assert synced.returncode == 0 and "identity_late" in synced.stdout, synced.stdout + synced.stderr
    server.wait_for("the opened announcement", lambda e: e["event"] == "announced" and e.get("occasion") == "opened")
    server.stop()
    assert opened(server.events()) == ["identity_late"]
    assert server.chat().count("is open") == 1 and "Leaderboard identity_late is open" in server.chat()


def test_a_modal_gpu_the_operator_routed_without_credentials_is_warned_about_once(
    home: Path, started: Callable[..., Server]
) -> None:
    # The control for the Modal line: asked for (the shipped H100 entry switched to Modal, as
    # config/kernelcup.yml documents), it is still said.
    server = started(KERNELCUP_GPUS__H100__RUNNER="modal")
    server.wait_until_scheduled()
    server.stop()
    warned = [e for e in server.events() if e["level"] == "warning" and "Modal" in e["event"]]
    assert len(warned) == 1 and "H100" in warned[0]["gpus"]
    summary = next(e for e in server.events() if e["event"] == "serving")
    assert summary["runners_off"] == {"modal": "no Modal credentials"}


def test_leaderboards_a_command_created_while_the_bot_was_down_are_each_announced_once_at_start(
    home: Path, started: Callable[..., Server]
) -> None:
    # Several "opened" jobs due at the same instant as the scheduler's first pass: each runs once,
    # and none is refused by APScheduler as a second instance of itself.
    first = handed_off(home, "list")  # no server: the embedded CLI loads the shipped leaderboards
    assert first.returncode == 0, first.stdout + first.stderr
    late = [f"identity_late{i}" for i in range(3)]
    for name in late:
        shutil.copytree(ROOT / "leaderboards/identity", home / "leaderboards" / name,
                        ignore=shutil.ignore_patterns("solutions", "__pycache__"))
    synced = handed_off(home, "admin", "sync")
    assert synced.returncode == 0 and all(name in synced.stdout for name in late), synced.stdout + synced.stderr
    server = started()
    server.wait_until_scheduled()
    for name in late:
        server.wait_for(f"{name}'s announcement", lambda e, name=name: e["event"] == "announced"  # type: ignore[misc]
                        and e.get("leaderboard") == name)
    server.stop()
    assert sorted(opened(server.events())) == late
    assert server.chat().count("is open") == len(late)
    assert server.raw_log_lines() == []
    assert not any("maximum number of running instances" in json.dumps(e) for e in server.events())
