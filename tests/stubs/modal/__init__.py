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

The server is ``SERVER`` (modal/_server.py, in the test's process): containers are processes
(``python -m modal._container``) that import the function's module with this folder first on
``PYTHONPATH``, so they use this stub too; a Dict lives in files under the server's folder, so
containers and the test share it. A container serves one input, stays up for the function's
``scaledown_window`` as a warm Modal container does (a cancelled input's too: only
``terminate_containers`` ends it at once), then stops, taking every process it started with it.
"""

from __future__ import annotations

import asyncio
import os
import pickle
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Generic, ParamSpec, TypeVar

from . import config, exception
from ._server import CALL_ENV, POLL_S, REMOTE_ENV, SERVER, Server, descendants, kill_tree, state_dir

__all__ = ["SERVER", "App", "Dict", "Function", "FunctionCall", "Image", "Server", "config",
           "current_function_call_id", "descendants", "exception", "is_local", "kill_tree"]

P = ParamSpec("P")
R = TypeVar("R")


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
