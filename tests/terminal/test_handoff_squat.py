"""Another local user who binds the hand-off socket first gets nothing: neither files nor tokens.

The hole: ``serve`` listened at ``kernelcup.sock`` beside the database, so where that folder (or
``var/`` for PostgreSQL) was writable by another user, they could bind the path before the bot
did; the CLI then sent them its orders, files and all, and the real server turned its hand-off
off. Now the socket lives in a folder of its own (``kernelcup.sock.d/``, 0700), the server refuses
a folder that is not its user's alone, and the client hands nothing to a socket whose folder,
socket or listening process belongs to another user or whose folder or socket others can write.

The squatter is a real process of uid 65534 (``nobody``), run by root: these tests need root.
It records every connection and byte it receives, as JSON lines on its stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from sqlalchemy import make_url, text

from kernelcup.adapters.terminal.handoff import (
    VERSION,
    encode,
    hand_off,
    socket_path,
)
from kernelcup.adapters.terminal.handoff_listener import HandoffListener
from kernelcup.adapters.terminal.render import TerminalRenderer
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.messages import Attachment
from kernelcup.core.store.db import make_engine
from kernelcup.core.wire import attachment_from_wire, attachment_to_wire

ROOT = Path(__file__).resolve().parents[2]
KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]
SOLUTION = ROOT / "leaderboards/identity/solutions/pytorch.py"
NOBODY = 65534
WAIT_S = 240.0  # a budget for what a loaded 2-core box does in seconds; every wait ends on its condition

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a process as another user")

# The squatter: binds each path it is given (making a missing folder, 0755, as its own), then
# records every connection, every byte and every close on stdout. Run as uid 65534.
SQUATTER = r"""
import json, os, select, socket, sys
listeners = {}
for path in sys.argv[1:]:
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.mkdir(folder, 0o755)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    os.chmod(path, 0o666)
    sock.listen(16)
    listeners[sock] = path
print(json.dumps({"event": "ready"}), flush=True)
open_connections = {}
while True:
    readable, _, _ = select.select([*listeners, *open_connections], [], [])
    for sock in readable:
        if sock in listeners:
            connection, _ = sock.accept()
            open_connections[connection] = listeners[sock]
            print(json.dumps({"event": "connection", "socket": listeners[sock]}), flush=True)
            continue
        data = sock.recv(1 << 20)
        path = open_connections[sock]
        if data:
            print(json.dumps({"event": "data", "socket": path, "text": data.decode(errors="replace")}), flush=True)
        else:
            print(json.dumps({"event": "closed", "socket": path}), flush=True)
            del open_connections[sock]
            sock.close()
"""


def _runnable_by_others(path: str) -> bool:
    real = Path(path).resolve()
    return all(p.stat().st_mode & stat.S_IXOTH for p in [real, *real.parents])


def _interpreter_for_others() -> str | None:
    """A Python uid 65534 may run (this one may live under /root, closed to others)."""
    candidates = [sys.executable, shutil.which("python3"), "/usr/bin/python3", "/usr/local/bin/python3"]
    return next((p for p in candidates if p and Path(p).exists() and _runnable_by_others(p)), None)


def _as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


class Lines:
    """A process's output, line by line, read by a thread so a test can wait for one line."""

    def __init__(self, stream: Any) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, wanted: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=deadline - time.monotonic())
            except queue.Empty:
                break
            if line is None:
                break
            self.seen.append(line)
            if wanted(line):
                return line
        raise AssertionError(f"never saw {what}; saw:\n{''.join(self.seen)}")


class Squatter:
    """A process of uid 65534 listening at ``paths``, recording what reaches it."""

    def __init__(self, *paths: Path) -> None:
        interpreter = _interpreter_for_others()
        if interpreter is None:
            pytest.skip("no Python here that uid 65534 may run")
        self.process = subprocess.Popen([interpreter, "-I", "-S", "-c", SQUATTER, *map(str, paths)], cwd="/",
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        preexec_fn=_as_nobody)
        self.lines = Lines(self.process.stdout)
        self.lines.wait_for(lambda line: '"ready"' in line, "the squatter ready")

    def record(self) -> list[dict[str, str]]:
        return [json.loads(line) for line in self.lines.seen if line.startswith("{")][1:]  # after "ready"

    def wait_for(self, event: str, marker: str = "") -> None:
        self.lines.wait_for(lambda line: f'"event": "{event}"' in line and marker in line, f"{event} {marker}")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(timeout=60)


def control_order(squatter: Squatter, path: Path, marker: str) -> None:
    """What the client did before this change: connect by the path and send the order, file
    included, before any answer. The squatter must record it, or its silence proves nothing."""
    order = {"kernelcup_handoff": VERSION, "database": "any", "command": "submit", "args": {"mode": "test"},
             "attachments": [attachment_to_wire(Attachment("kernel.py", marker.encode()))], "user": "tester"}
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        sock.sendall(encode(order))
    squatter.wait_for("closed", str(path))  # after its data, in the order the squatter read them
    received = "".join(e["text"] for e in squatter.record() if e["event"] == "data" and e["socket"] == str(path))
    file = json.loads(received)["attachments"][0]
    assert attachment_from_wire(file).content == marker.encode()  # the file, whole, in another user's hands


def environment(home: Path, url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "KERNELCUP_DATABASE_URL": url, "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"),
            "KERNELCUP_WEB__ENABLED": "false", "KERNELCUP_USER": "tester", "COLUMNS": "200", **extra}


def kernelcup(home: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KERNELCUP, *args], cwd=home, env=environment(home, url), text=True,
                          capture_output=True, timeout=WAIT_S)


def logged(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


@pytest.fixture
def home() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kc", dir="/tmp"))  # short: a socket's path has ~100 characters
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_database(postgres_admin_url: str) -> Iterator[str]:
    name = f"kc_squat_{os.getpid()}_{os.urandom(4).hex()}"
    admin = make_engine(postgres_admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(postgres_admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def kernel_with(marker: str, home: Path) -> Path:
    kernel = home / "kernel.py"
    kernel.write_text(SOLUTION.read_text() + f"\n# {marker}\n")
    return kernel


# --- a real server and a real CLI against a real squatter ------------------------------------


@needs_root
def test_a_squatter_in_a_world_writable_database_folder_gets_nothing_and_both_sides_refuse_loudly(
    home: Path,
) -> None:
    home.chmod(0o777)  # the old hole: anyone may create names beside the database
    url = f"sqlite:///{home}/kernelcup.db"
    new_path = socket_path(load_settings(env={"KERNELCUP_DATABASE_URL": url}))
    old_path = home / "kernelcup.sock"
    squatter = Squatter(old_path, new_path)
    try:
        # The control: uid 65534 could create names in the folder, both where serve listened and
        # where it listens now.
        assert old_path.lstat().st_uid == new_path.lstat().st_uid == new_path.parent.lstat().st_uid == NOBODY

        serve = subprocess.run([*KERNELCUP, "serve", "--no-console"], cwd=home, env=environment(home, url),
                               text=True, capture_output=True, timeout=WAIT_S)
        assert serve.returncode == 4, serve.stdout + serve.stderr
        assert f"{home} has mode 0777" in serve.stderr and f"chmod 755 {home}" in serve.stderr

        marker = "squat-marker-" + os.urandom(4).hex()
        submit = kernelcup(home, url, "submit", "test", str(kernel_with(marker, home)))
        assert submit.returncode == 4, submit.stdout + submit.stderr
        assert f"chmod 755 {home}" in submit.stderr
        said = logged(home / "var" / "kernelcup.log")
        refusals = [e for e in said if e["event"] == "refused to hand the command to the socket: running embedded"]
        assert len(refusals) == 1 and f"belongs to uid {NOBODY}" in refusals[0]["reason"]

        control_order(squatter, old_path, marker)
        assert [e for e in squatter.record() if e["socket"] != str(old_path)] == []
        assert [e for e in squatter.record() if e["event"] == "connection"] == [  # the control's alone
            {"event": "connection", "socket": str(old_path)}]
    finally:
        squatter.stop()


@needs_root
@pytest.mark.postgres
def test_a_squatter_in_a_shared_var_folder_gets_no_file_and_no_token_and_serve_serves_on(
    home: Path, postgres_database: str,
) -> None:
    """PostgreSQL has no database folder: the socket lives under ``var/`` of the working folder,
    here writable by everyone. The squatter makes ``var/kernelcup.sock.d/`` first."""
    home.chmod(0o755)
    (home / "var").mkdir(mode=0o777)
    (home / "var").chmod(0o777)
    new_path = home / "var" / "kernelcup.sock.d" / "kernelcup.sock"
    old_path = home / "var" / "kernelcup.sock"
    squatter = Squatter(old_path, new_path)
    output = home / "serve.out"
    with output.open("w") as out:
        server = subprocess.Popen([*KERNELCUP, "serve", "--no-console"], cwd=home,
                                  env=environment(home, postgres_database), stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + WAIT_S
        while "the hand-off socket is off" not in output.read_text():  # the console's line, after the log's
            assert server.poll() is None and time.monotonic() < deadline, output.read_text()
            time.sleep(0.1)
        off = [e for e in logged(output) if e["event"].startswith("hand-off off: its socket folder")]
        assert len(off) == 1 and off[0]["folder"] == str(new_path.parent) and str(NOBODY) in off[0]["problem"]

        marker = "squat-marker-" + os.urandom(4).hex()
        submit = kernelcup(home, postgres_database, "submit", "test", str(kernel_with(marker, home)))
        assert submit.returncode == 0 and "tests passed" in submit.stdout, submit.stdout + submit.stderr
        token = kernelcup(home, postgres_database, "token")
        assert token.returncode == 0, token.stdout + token.stderr
        said = logged(home / "var" / "kernelcup.log")
        refusals = [e for e in said if e["event"] == "refused to hand the command to the socket: running embedded"]
        assert len(refusals) == 2 and all(f"belongs to uid {NOBODY}" in e["reason"] for e in refusals)
        assert server.poll() is None  # serve serves on, without the hand-off
        assert not any(e["event"] == "hand-off command" for e in logged(output))

        control_order(squatter, new_path, marker)
        assert [e["socket"] for e in squatter.record() if e["event"] == "connection"] == [str(new_path)]
    finally:
        squatter.stop()
        server.terminate()
        server.wait(timeout=60)


# --- the client's checks, one at a time, against sockets that look like the server's ---------


def _settings(home: Path) -> Settings:
    return load_settings(env={"KERNELCUP_DATABASE_URL": f"sqlite:///{home}/kernelcup.db"})


def _renderer(home: Path) -> TerminalRenderer:
    return TerminalRenderer(Console(file=StringIO()), home)


@needs_root
def test_a_socket_dressed_as_the_servers_but_served_by_another_user_gets_nothing(home: Path) -> None:
    """Folder and socket handed to root after the bind, with the server's modes: only the
    listener's own uid (SO_PEERCRED) gives the squatter away, and the client sends no byte."""
    home.chmod(0o755)
    settings = _settings(home)
    path = socket_path(settings)
    path.parent.mkdir(mode=0o777)
    path.parent.chmod(0o777)  # so that uid 65534 may bind in it; closed again below
    squatter = Squatter(path)
    try:
        os.chown(path, 0, 0)
        path.chmod(0o600)
        os.chown(path.parent, 0, 0)
        path.parent.chmod(0o700)
        handed = asyncio.run(hand_off(settings, "list", {}, [], "tester", _renderer(home)))
        assert handed.exit_code is None and handed.refused
        assert f"runs as uid {NOBODY}" in handed.reason and "nothing was sent" in handed.reason
        squatter.wait_for("closed")
        assert [e["event"] for e in squatter.record()] == ["connection", "closed"]
    finally:
        squatter.stop()


class Listener:
    """A socket of root's own at ``path``, recording what reaches it (the client's checks are on
    the folder and socket modes here, not on who listens)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.received: list[bytes] = []
        self.connections = 0

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.received.append(await reader.read())
        writer.close()

    async def attempt(self, settings: Settings, home: Path, socket_mode: int) -> tuple[Any, int]:
        server = await asyncio.start_unix_server(self._client, path=str(self.path))
        self.path.chmod(socket_mode)
        try:
            handed = await hand_off(settings, "submit", {"mode": "test"}, [Attachment("k.py", b"secret")],
                                    "tester", _renderer(home))
        finally:
            server.close()
            await server.wait_closed()
        return handed, self.connections


@pytest.mark.parametrize(("folder_mode", "socket_mode"), [(0o777, 0o600), (0o770, 0o600), (0o700, 0o666),
                                                          (0o700, 0o620)])
def test_the_client_hands_nothing_to_a_socket_or_folder_others_can_write(
    home: Path, folder_mode: int, socket_mode: int,
) -> None:
    settings = _settings(home)
    path = socket_path(settings)
    path.parent.mkdir(mode=0o700)
    path.parent.chmod(folder_mode)
    handed, connections = asyncio.run(Listener(path).attempt(settings, home, socket_mode))
    assert handed.exit_code is None and handed.refused, handed
    shown = f"{socket_mode:04o}" if folder_mode == 0o700 else f"{folder_mode:04o}"
    assert f"has mode {shown}" in handed.reason
    assert connections == 0


def test_the_client_follows_no_link_to_a_socket_folder(home: Path) -> None:
    settings = _settings(home)
    path = socket_path(settings)
    elsewhere = home / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    path.parent.symlink_to(elsewhere)
    handed, connections = asyncio.run(Listener(elsewhere / path.name).attempt(settings, home, 0o600))
    assert handed.refused and "is not a folder" in handed.reason and connections == 0


# --- the server's side ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o755, 0o711, 0o770, 0o777])
def test_serve_refuses_a_socket_folder_with_any_bit_for_others_and_says_so(
    home: Path, mode: int, capsys: pytest.CaptureFixture[str],
) -> None:
    settings = _settings(home)
    folder = socket_path(settings).parent
    folder.mkdir(mode=0o700)
    folder.chmod(mode)
    listener = HandoffListener(settings)
    asyncio.run(asyncio.wait_for(listener.run(app=None), WAIT_S))  # type: ignore[arg-type]  # refused before any use
    said = capsys.readouterr().err
    assert "the hand-off socket is off" in said and f"has mode {mode:04o}" in said and f"chmod 700 {folder}" in said
    assert list(folder.iterdir()) == [] and stat.S_IMODE(folder.stat().st_mode) == mode  # left as it was


@needs_root
def test_serve_refuses_a_socket_folder_of_another_user_and_says_so(
    home: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    settings = _settings(home)
    folder = socket_path(settings).parent
    folder.mkdir(mode=0o700)
    os.chown(folder, NOBODY, NOBODY)
    asyncio.run(asyncio.wait_for(HandoffListener(settings).run(app=None), WAIT_S))  # type: ignore[arg-type]
    said = capsys.readouterr().err
    assert "the hand-off socket is off" in said and f"belongs to uid {NOBODY}" in said
    assert list(folder.iterdir()) == []


def test_a_real_server_makes_its_own_private_folder_and_takes_the_command(home: Path) -> None:
    """The checks refuse squatters, not the bot: a fresh serve's folder and socket pass them."""
    url = f"sqlite:///{home}/kernelcup.db"
    path = socket_path(load_settings(env={"KERNELCUP_DATABASE_URL": url}))
    output = home / "serve.out"
    with output.open("w") as out:
        server = subprocess.Popen([*KERNELCUP, "serve", "--no-console"], cwd=home, env=environment(home, url),
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + WAIT_S
        while not path.exists():
            assert server.poll() is None and time.monotonic() < deadline, output.read_text()
            time.sleep(0.1)
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
        assert path.parent == home / "kernelcup.sock.d"
        listed = kernelcup(home, url, "list")
        assert listed.returncode == 0 and "vectoradd" in listed.stdout, listed.stdout + listed.stderr
        assert any(e["event"] == "hand-off command" for e in logged(output))
    finally:
        server.terminate()
        server.wait(timeout=60)
