"""A stand-in for the ``modal`` SDK (1.6): only the parts kernelcup calls, with Modal's
documented behaviour, and a local "server" that runs each spawned call in its own container.

What kernelcup calls (kernelcup/runners/modal.py, kernelcup/runners/modal_app.py):
``App(name, image=).function(...)``, ``Image`` (a recorded chain; ``env`` reaches the container),
``Function.from_name(app, name).spawn[.aio](*args)`` returning a ``FunctionCall`` with
``object_id``, ``FunctionCall.from_id(id).get[.aio](timeout=)`` and ``.cancel[.aio]()``,
``Dict.from_name(name, create_if_missing=).get[.aio](key)`` and ``.put(key, value)``,
``Function.local(...)``, ``is_local()``, ``current_function_call_id()``.

Behaviour kept from modal 1.6 (modal/_functions.py, modal/_utils/function_utils.py,
modal/_container_entrypoint.py, modal/_runtime/container_io_manager.py):

- ``get(timeout)`` raises the builtin ``TimeoutError`` while the call runs (``poll_function``),
  ``OutputExpiredError`` once its output is gone, the function's own exception when it raised
  (``ExecutionError`` where it cannot be unpickled here), ``FunctionTimeoutError`` past the
  function's ``timeout``, and ``RemoteError`` for a terminated (cancelled) input. ``get`` does not
  consume the output: it can be read again.
- ``cancel`` sends the container SIGUSR1, which raises ``InputCancellation`` in the sync
  function's main thread; the input ends as terminated.
- spawning needs credentials (``AuthError`` without), a deployed function (``NotFoundError``).

The server is ``SERVER`` (this module's, in the test's process): containers are processes
(``python -m modal._container``) that import the function's module with this folder first on
``PYTHONPATH``, so they use this stub too; a Dict lives in files under the server's folder, so
containers and the test share it. A container serves one input, stays up for the function's
``scaledown_window`` as a warm Modal container does (a cancelled input's too: only
``terminate_containers`` ends it at once), then stops, taking every process it started with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

from . import config, exception

__all__ = ["App", "Dict", "Function", "FunctionCall", "Image", "config", "current_function_call_id", "exception",
           "is_local"]

P = ParamSpec("P")
R = TypeVar("R")

STUB_ROOT = Path(__file__).resolve().parent.parent  # the folder that makes ``import modal`` find this
STATE_ENV = "MODAL_STUB_STATE"  # the server's folder (Dicts, outputs), for containers
CALL_ENV = "MODAL_STUB_CALL_ID"  # set in a container: the input it serves
REMOTE_ENV = "MODAL_IS_REMOTE"  # as Modal sets it in its containers
POLL_S = 0.01


class _Method(Generic[P, R]):
    """A method with Modal's two interfaces: call it blocking, or await ``.aio(...)``."""

    def __init__(self, aio: Callable[P, Coroutine[Any, Any, R]]) -> None:
        self.aio = aio

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return asyncio.run(self.aio(*args, **kwargs))


def is_local() -> bool:
    return os.environ.get(REMOTE_ENV) != "1"


def current_function_call_id() -> str | None:
    return os.environ.get(CALL_ENV)


# --- definitions: images, apps, functions ---------------------------------------------------------


class Image:
    """A recorded build chain; only ``env`` matters here (it is the container's environment)."""

    def __init__(self, steps: tuple[tuple[str, tuple[Any, ...]], ...] = (), env: dict[str, str] | None = None) -> None:
        self.steps = steps
        self.environment: dict[str, str] = dict(env or {})

    def _then(self, step: str, *args: Any, env: dict[str, str] | None = None) -> Image:
        return Image((*self.steps, (step, args)), {**self.environment, **(env or {})})

    @staticmethod
    def debian_slim(python_version: str | None = None) -> Image:
        return Image((("debian_slim", (python_version,)),))

    @staticmethod
    def from_registry(tag: str, *, add_python: str | None = None) -> Image:
        return Image((("from_registry", (tag, add_python)),))

    def pip_install(self, *packages: str) -> Image:
        return self._then("pip_install", *packages)

    def env(self, variables: dict[str, str]) -> Image:
        return self._then("env", variables, env=variables)

    def add_local_python_source(self, *modules: str) -> Image:
        return self._then("add_local_python_source", *modules)


class Function:
    """A function of an app (``app.function(...)(body)``) or a reference by name (``from_name``)."""

    def __init__(self, app_name: str, name: str, body: Callable[..., Any] | None = None,
                 image: Image | None = None, options: dict[str, Any] | None = None) -> None:
        self.app_name, self.name, self.body, self.image = app_name, name, body, image or Image()
        self.options = dict(options or {})
        self.spawn = _Method(self._spawn)

    @classmethod
    def from_name(cls, app_name: str, name: str, *, environment_name: str | None = None) -> Function:
        return cls(app_name, name)  # looked up when used, as Modal's are

    def local(self, *args: Any, **kwargs: Any) -> Any:
        assert self.body is not None, "a Function looked up by name has no local body"
        return self.body(*args, **kwargs)

    async def _spawn(self, *args: Any, **kwargs: Any) -> FunctionCall:
        return FunctionCall(SERVER.spawn(self.app_name, self.name, args, kwargs))


class App:
    def __init__(self, name: str | None = None, *, image: Image | None = None) -> None:
        self.name = name or "app"
        self.image = image or Image()
        self.registered_functions: dict[str, Function] = {}

    def function(self, *, image: Image | None = None, name: str | None = None, timeout: int = 300,
                 **options: Any) -> Callable[[Callable[..., Any]], Function]:
        def wrap(body: Callable[..., Any]) -> Function:
            tag = name or body.__name__
            function = Function(self.name, tag, body, image or self.image, {"timeout": timeout, **options})
            self.registered_functions[tag] = function
            return function

        return wrap


class FunctionCall:
    def __init__(self, object_id: str) -> None:
        self.object_id = object_id
        self.get = _Method(self._get)
        self.cancel = _Method(self._cancel)

    @classmethod
    def from_id(cls, function_call_id: str) -> FunctionCall:
        return cls(function_call_id)

    async def _get(self, timeout: float | None = None, *, index: int = 0) -> Any:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        call = SERVER.call(self.object_id)
        while True:
            if call.ended():
                return call.output()
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError()  # the builtin, as ``poll_function`` raises it
            await asyncio.sleep(POLL_S)

    async def _cancel(self, terminate_containers: bool = False) -> None:
        SERVER.cancel(self.object_id, terminate_containers)


class Dict:
    """A named Dict, one pickle file per key under the server's folder."""

    def __init__(self, name: str, create_if_missing: bool) -> None:
        self.name = name
        self._create = create_if_missing
        self.get = _Method(self._get)
        self.put = _Method(self._put)

    @classmethod
    def from_name(cls, name: str, *, environment_name: str | None = None, create_if_missing: bool = False) -> Dict:
        return cls(name, create_if_missing)

    def _folder(self) -> Path:
        folder = state_dir() / "dicts" / self.name
        if not folder.is_dir():
            if not self._create:
                raise exception.NotFoundError(f"Dict '{self.name}' not found")
            folder.mkdir(parents=True, exist_ok=True)
        return folder

    async def _get(self, key: Any, default: Any = None) -> Any:
        path = self._folder() / pickle.dumps(key).hex()
        try:
            return pickle.loads(path.read_bytes())
        except FileNotFoundError:
            return default

    async def _put(self, key: Any, value: Any, *, skip_if_exists: bool = False) -> bool:
        path = self._folder() / pickle.dumps(key).hex()
        if skip_if_exists and path.exists():
            return False
        part = path.with_name(f"{path.name}.{os.getpid()}.part")
        part.write_bytes(pickle.dumps(value))
        part.replace(path)  # a reader sees the old value or the new one, never half of one
        return True


def state_dir() -> Path:
    folder = os.environ.get(STATE_ENV) or (str(SERVER.folder) if SERVER.folder else "")
    if not folder:
        raise exception.ConnectionError("the stub Modal server is not running (no state folder)")
    return Path(folder)


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
        except FileNotFoundError:
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
