"""The stub Modal server (``modal.SERVER``): deployed functions, every call, its container process,
and what tests make the platform do (refuse a spawn, kill a container, drop an output)."""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import config, exception

if TYPE_CHECKING:
    from . import App, Function

STUB_ROOT = Path(__file__).resolve().parent.parent  # the folder that makes ``import modal`` find this
STATE_ENV = "MODAL_STUB_STATE"  # the server's folder (Dicts, outputs), for containers
CALL_ENV = "MODAL_STUB_CALL_ID"  # set in a container: the input it serves
REMOTE_ENV = "MODAL_IS_REMOTE"  # as Modal sets it in its containers
POLL_S = 0.01


# --- the server: deployed functions, calls, containers --------------------------------------------


@dataclass
class Call:
    """One spawned input and the container running it."""

    call_id: str
    app: str
    function: str
    args: tuple[Any, ...]
    process: subprocess.Popen[bytes]
    output_path: Path
    log_path: Path
    cancelled: bool = False
    timed_out: bool = False
    killed_with: BaseException | None = None
    expired: bool = False
    timer: threading.Timer | None = None

    def ended(self) -> bool:
        # The container outlives its input (warm until its scaledown window passes): the input
        # has ended once its output is written, or the container died without one.
        return self.cancelled or self.output_path.exists() or self.process.poll() is not None

    def output(self) -> Any:
        """What ``get`` gives for an ended call: its value, or the error Modal raises."""
        if self.expired:
            raise exception.OutputExpiredError()
        if self.cancelled:
            raise exception.RemoteError("")  # a TERMINATED result carries no exception text
        if self.killed_with is not None:
            raise self.killed_with
        if self.timed_out:
            raise exception.FunctionTimeoutError(f"Function call {self.call_id} timed out")
        try:
            status, blob = pickle.loads(self.output_path.read_bytes())
        except FileNotFoundError:  # the server's text for a crashed container is not in the client's
            # source: this wording is the stub's own (the type, RemoteError, is what _process_result raises)
            code = self.process.returncode
            code = 128 - code if code < 0 else code  # a signal as a shell reports it: SIGSEGV is 139
            raise exception.RemoteError(f"Container crashed with exit code {code}") from None
        if status == "terminated":
            raise exception.RemoteError("")
        if status == "success":
            return pickle.loads(blob)
        try:
            error = pickle.loads(blob)
        except Exception as exc:
            raise exception.ExecutionError(
                f"Could not deserialize remote exception due to local error:\n{exc!r}"
            ) from exc
        raise error


@dataclass
class Server:
    """Modal's side: what is deployed, every call, and what tests make the platform do."""

    folder: Path | None = None
    deployed: dict[tuple[str, str], Function] = field(default_factory=dict)
    calls: dict[str, Call] = field(default_factory=dict)
    spawned: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)  # (app, function, args)
    cancelled: list[str] = field(default_factory=list)
    refuse_spawns: Exception | None = None  # e.g. a quota refusal
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def start(self, folder: Path) -> None:
        self.stop()
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.deployed.clear()
        self.spawned.clear()
        self.cancelled.clear()
        self.refuse_spawns = None

    def stop(self) -> None:
        """End every container (a test's teardown)."""
        for call in self.calls.values():
            if call.timer is not None:
                call.timer.cancel()
            _kill_container(call.process)
        self.calls.clear()
        self.folder = None

    def deploy(self, app: App) -> None:
        """``modal deploy``: the app's functions become reachable by name."""
        for tag, function in app.registered_functions.items():
            self.deployed[(app.name, tag)] = function

    def spawn(self, app_name: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        if not (config.config.get("token_id") or config.config.get("oauth_refresh_token")):
            raise exception.AuthError("Token missing. Could not authenticate client.")
        if self.folder is None:
            raise exception.ConnectionError("the stub Modal server is not running")
        function = self.deployed.get((app_name, name))
        if function is None or function.body is None:
            raise exception.NotFoundError(f"Lookup failed for Function '{name}' from the '{app_name}' app")
        if self.refuse_spawns is not None:
            raise self.refuse_spawns
        call_id = f"fc-01STUB{next(self._ids):06d}"
        self.spawned.append((app_name, name, args))
        self.calls[call_id] = self._container(call_id, function, args, kwargs)
        return call_id

    def _container(self, call_id: str, function: Function, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Call:
        assert self.folder is not None and function.body is not None
        output_path = self.folder / f"{call_id}.output"
        log_path = self.folder / f"{call_id}.log"
        env = {key: value for key, value in os.environ.items() if key in ("PATH", "HOME", "LANG", "TMPDIR")}
        env.update(function.image.environment)
        env.update({
            "PYTHONPATH": os.pathsep.join([str(STUB_ROOT), str(_project_root())]),
            STATE_ENV: str(self.folder), CALL_ENV: call_id, REMOTE_ENV: "1",
        })
        body = function.body
        scaledown_s = str(function.options.get("scaledown_window", 60))
        command = [sys.executable, "-m", "modal._container", body.__module__, body.__qualname__, str(output_path),
                   scaledown_s]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, env=env,
                                       cwd=self.folder, start_new_session=True)
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(pickle.dumps((args, kwargs)))
            process.stdin.close()
        call = Call(call_id, function.app_name, function.name, args, process, output_path, log_path)
        call.timer = threading.Timer(float(function.options.get("timeout", 300)), self._time_out, (call,))
        call.timer.daemon = True
        call.timer.start()
        return call

    def _time_out(self, call: Call) -> None:
        if not call.ended():
            call.timed_out = True
            _kill_container(call.process)

    def call(self, call_id: str) -> Call:
        call = self.calls.get(call_id)
        if call is None:
            raise exception.NotFoundError(f"Function call {call_id} not found")
        return call

    def cancel(self, call_id: str, terminate_containers: bool = False) -> None:
        self.cancelled.append(call_id)
        call = self.call(call_id)
        if call.ended():
            return
        call.cancelled = True
        if terminate_containers:
            _kill_container(call.process)
        else:
            with contextlib.suppress(ProcessLookupError):
                call.process.send_signal(signal.SIGUSR1)  # InputCancellation in the function's thread

    # What the platform does on its own, for tests.

    def kill(self, call_id: str, error: BaseException) -> None:
        """The platform ends the call's container (e.g. an out-of-memory kill); ``get`` raises ``error``."""
        call = self.call(call_id)
        call.killed_with = error
        _kill_container(call.process)

    def expire(self, call_id: str) -> None:
        """Time passes until Modal drops the ended call's output."""
        self.wait_until_ended(call_id, 300.0)
        self.call(call_id).expired = True

    def wait_until_ended(self, call_id: str, timeout_s: float) -> None:
        call = self.call(call_id)
        until = time.monotonic() + timeout_s
        while not call.ended():
            if time.monotonic() > until:
                raise exception.TimeoutError(f"call {call_id} still running after {timeout_s:g} s")
            time.sleep(POLL_S)

    def log(self, call_id: str) -> str:
        return self.call(call_id).log_path.read_text(errors="replace")


def _project_root() -> Path:
    """Where the test's own modules are importable from (the first ``sys.path`` entry that has them)."""
    for entry in sys.path:
        if entry and (Path(entry) / "kernelcup" / "__init__.py").exists():
            return Path(entry).resolve()
    return Path.cwd()


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, whatever session it moved to (``/proc``'s parent links)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        parents.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s descendants, then ``pid``: a stopped container leaves no process behind."""
    for _ in range(2):  # a process started during the first pass is found by the second
        for child in descendants(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)


def _kill_container(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        kill_tree(process.pid)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=30)


SERVER = Server()


def state_dir() -> Path:
    folder = os.environ.get(STATE_ENV) or (str(SERVER.folder) if SERVER.folder else "")
    if not folder:
        raise exception.ConnectionError("the stub Modal server is not running (no state folder)")
    return Path(folder)
