"""The CLI beside a running ``kernelcup serve``: a real server process, the real CLI, one database.

The server listens on a unix socket beside the SQLite file; the CLI hands its command there and
prints what the embedded path prints. Temporary folders are short (``/tmp/kcXXXX``): a unix
socket's path has room for about 100 characters.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernelcup.adapters.terminal.handoff import (
    VERSION,
    database_identity,
    hand_off,
    socket_path,
)
from kernelcup.adapters.terminal.handoff_listener import ORDER_S, HandoffListener
from kernelcup.core.config import load_settings

ROOT = Path(__file__).resolve().parents[2]
KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]
SOLUTION = ROOT / "leaderboards/identity/solutions/pytorch.py"


@pytest.fixture
def home() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kc", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def environment(home: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "KERNELCUP_DATABASE_URL": f"sqlite:///{home}/kernelcup.db",
        "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"),
        "KERNELCUP_WEB__ENABLED": "false",  # no port taken: only the hand-off socket
        "KERNELCUP_USER": "tester",
        "COLUMNS": "200",
        **extra,
    }


def kernelcup(home: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KERNELCUP, *args], cwd=home, env=environment(home, **extra), text=True,
                          capture_output=True, timeout=240)


class Server:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.output = home / "serve.out"
        with self.output.open("w") as out:
            self.process = subprocess.Popen([*KERNELCUP, "serve", "--no-console"], cwd=home, env=environment(home),
                                            stdout=out, stderr=subprocess.STDOUT)
        self.socket = home / "kernelcup.sock.d" / "kernelcup.sock"
        deadline = time.monotonic() + 120
        while not self.socket.exists():
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, "serve never opened its socket:\n" + self.log()
            time.sleep(0.1)

    def log(self) -> str:
        return self.output.read_text()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            self.process.wait(timeout=60)


@pytest.fixture
def server(home: Path) -> Iterator[Server]:
    running = Server(home)
    try:
        yield running
    finally:
        running.stop()


def shown(output: str) -> list[str]:
    """The CLI's lines without what differs from run to run (ids, dates, elapsed times)."""
    return [re.sub(r"\d", "0", line.strip()) for line in output.splitlines() if line.strip()]


def test_a_submission_runs_in_the_server_and_prints_what_the_embedded_cli_prints(home: Path, server: Server) -> None:
    handed = kernelcup(home, "submit", "test", str(SOLUTION))
    assert handed.returncode == 0, handed.stdout + handed.stderr
    assert "tests passed" in handed.stdout
    ran = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    assert any(e["event"] == "hand-off command" and e["actor"] == "console:tester" for e in ran)
    assert any(e["event"] == "job finished" and e["status"] == "succeeded" for e in ran)
    cli_log = home / "var" / "kernelcup.log"  # the embedded path's log: it never opened the store
    assert not cli_log.exists() or "job started" not in cli_log.read_text()

    server.stop()
    embedded = kernelcup(home, "submit", "test", str(SOLUTION))
    assert embedded.returncode == 0, embedded.stdout + embedded.stderr
    assert shown(handed.stdout) == shown(embedded.stdout)


def test_every_command_goes_to_the_server_with_its_exit_status(home: Path, server: Server) -> None:
    listed = kernelcup(home, "list")
    assert listed.returncode == 0 and "vectoradd" in listed.stdout
    unknown = kernelcup(home, "show", "nosuch")
    assert unknown.returncode == 1 and "There is no leaderboard 'nosuch'" in unknown.stdout
    wrong = kernelcup(home, "submit", "test", str(ROOT / "leaderboards/identity/solutions/wrong_offbyone.py"))
    assert wrong.returncode == 1 and "❌" in wrong.stdout
    assert server.log().count('"hand-off command"') == 3


def test_json_from_the_server_is_the_document_the_embedded_cli_prints(home: Path, server: Server) -> None:
    handed = kernelcup(home, "submit", "--mode", "test", str(SOLUTION), "--json")
    assert handed.returncode == 0, handed.stdout + handed.stderr
    document = json.loads(handed.stdout)
    assert document["ok"] is True and isinstance(document["submission_id"], int)
    assert "all 5 tests passed" in document["text"]
    refused = kernelcup(home, "show", "nosuch", "--output", "json")
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["problem"]["kind"] == "not_found"
    assert server.log().count('"hand-off command"') == 2

    server.stop()
    embedded = json.loads(kernelcup(home, "submit", "--mode", "test", str(SOLUTION), "--json").stdout)
    assert document.keys() == embedded.keys()
    assert [b["type"] for b in document["blocks"]] == [b["type"] for b in embedded["blocks"]]
    assert shown(document["text"]) == shown(embedded["text"])


def test_the_socket_is_the_users_alone_and_goes_with_the_server(home: Path, server: Server) -> None:
    mode = server.socket.stat().st_mode
    assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    server.stop()
    assert not server.socket.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_another_user_cannot_hand_a_command_to_the_server(home: Path, server: Server) -> None:
    child = os.fork()  # a process of uid 65534 (nobody) tries to connect; no exec, no interpreter
    if child == 0:
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(server.socket))
            os._exit(0)
        except PermissionError:
            os._exit(13)
        except BaseException:
            os._exit(1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 13


NOBODY = 65534
# A client of the hand-off, as small as can be: it sends one order and prints the first line the
# server answers ("" where the server closed the connection without a word).
CLIENT = """
import socket, sys
answer = b""
with socket.socket(socket.AF_UNIX) as sock:
    sock.settimeout(float(sys.argv[3]))
    sock.connect(sys.argv[1])
    try:
        sock.sendall(sys.argv[2].encode() + b"\\n")
        while not answer.endswith(b"\\n") and (chunk := sock.recv(65536)):
            answer += chunk
    except (BrokenPipeError, ConnectionResetError):
        pass
print(answer.decode().strip())
"""


def _runnable_by_others(path: str) -> bool:
    real = Path(path).resolve()
    return all(p.stat().st_mode & stat.S_IXOTH for p in [real, *real.parents])


def _interpreter_for_others() -> str | None:
    """A Python another user can run (this one may live under /root, closed to them)."""
    candidates = [sys.executable, shutil.which("python3"), "/usr/bin/python3", "/usr/local/bin/python3"]
    return next((p for p in candidates if p and Path(p).exists() and _runnable_by_others(p)), None)


def _as_user(uid: int) -> Callable[[], None]:
    def become() -> None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)

    return become


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_the_server_refuses_another_users_connection_that_the_sockets_mode_let_through(
    home: Path, server: Server
) -> None:
    """The socket's mode is one lock; the server's check of the peer's uid (SO_PEERCRED) is the
    other, and holds on its own: with the socket opened to everyone, a process of another uid
    connects, sends a well-formed order and gets nothing, and the server runs nothing for it."""
    interpreter = _interpreter_for_others()
    if interpreter is None:
        pytest.skip("no Python here that another user may run")
    home.chmod(0o711)  # others may pass through to the socket, nothing more
    server.socket.parent.chmod(0o711)
    server.socket.chmod(0o666)
    database = database_identity(load_settings(env={"KERNELCUP_DATABASE_URL": f"sqlite:///{home}/kernelcup.db"}))
    # The server reads an order for ORDER_S; a loaded box gets three times that to answer at all.
    wait_s = 3 * ORDER_S

    def order_as(user: str, uid: int | None) -> str:
        order = json.dumps({"kernelcup_handoff": VERSION, "database": database, "command": "list", "args": {},
                            "attachments": [], "user": user})
        sent = subprocess.run([interpreter, "-I", "-S", "-c", CLIENT, str(server.socket), order, str(wait_s)],
                              capture_output=True, text=True, timeout=2 * wait_s, cwd="/",
                              preexec_fn=None if uid is None else _as_user(uid))
        assert sent.returncode == 0, sent.stderr
        return sent.stdout.strip()

    assert order_as("mallory", NOBODY) == ""
    # The control: the same client and order from the server's own user is taken.
    assert json.loads(order_as("tester", None)) == {"type": "accepted"}
    said = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    refused = [e for e in said if e["event"] == "hand-off refused a connection from another user"]
    assert [e["uid"] for e in refused] == [NOBODY]
    commands = [e["actor"] for e in said if e["event"] == "hand-off command"]
    assert "console:mallory" not in commands


def test_without_an_answering_server_the_cli_runs_embedded_and_says_why_in_its_log(
    home: Path, server: Server
) -> None:
    server.stop(signal.SIGKILL)  # its socket file stays behind, with nobody listening
    assert server.socket.exists()
    done = kernelcup(home, "submit", "test", str(SOLUTION), KERNELCUP_LOGGING__LEVEL="debug")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tests passed" in done.stdout and done.stderr == ""
    said = [json.loads(line) for line in (home / "var" / "kernelcup.log").read_text().splitlines()]
    fallback = [e for e in said if e["event"] == "no kernelcup server to hand the command to"]
    assert len(fallback) == 1 and "nothing answers" in fallback[0]["reason"]
    assert any(e["event"] == "job finished" for e in said)


def test_a_server_of_another_database_declines_and_nothing_runs_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Not SQLite: both sides then meet at var/kernelcup.sock.d/kernelcup.sock in the working folder.
    short = Path(tempfile.mkdtemp(prefix="kc", dir="/tmp"))
    monkeypatch.chdir(short)
    ours = load_settings(env={"KERNELCUP_DATABASE_URL": "postgresql+psycopg://kc@db.example/one"})
    theirs = load_settings(env={"KERNELCUP_DATABASE_URL": "postgresql+psycopg://kc@db.example/two"})
    assert socket_path(ours) == socket_path(theirs) == short / "var" / "kernelcup.sock.d" / "kernelcup.sock"

    async def attempt() -> str:
        listener = HandoffListener(theirs)
        serving = asyncio.create_task(listener.run(app=None))  # type: ignore[arg-type]  # declines before any use
        while not listener.path.exists():
            await asyncio.sleep(0.01)
        try:
            from io import StringIO

            from rich.console import Console

            from kernelcup.adapters.terminal.render import TerminalRenderer

            handed = await hand_off(ours, "list", {}, [], "tester", TerminalRenderer(Console(file=StringIO()), short))
            assert handed.exit_code is None
            return handed.reason
        finally:
            await listener.stop()
            await serving

    try:
        assert "another database" in asyncio.run(attempt())
    finally:
        shutil.rmtree(short, ignore_errors=True)
