"""The Modal tests' stand-in for the ``modal`` package (tests/stubs/modal): the fixture puts it on
``sys.modules['modal']``, imports kernelcup's Modal modules afresh against it, and puts back
whatever was there (the real SDK, or nothing) when the test ends."""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import kernelcup.runners
from kernelcup.core.config import Settings
from tests.runners import modal_functions
from tests.runners.scripted_harness import Script

STUBS = Path(__file__).resolve().parents[1] / "stubs"
OURS = ("kernelcup.runners.modal", "kernelcup.runners.modal_app")


def _ours_or_modal(name: str) -> bool:
    return name == "modal" or name.startswith("modal.") or name in OURS


@dataclass
class ModalStub:
    """The stub SDK, its server, and kernelcup's Modal modules as imported against it."""

    sdk: ModuleType  # what ``import modal`` gives while the fixture holds
    runners: ModuleType  # kernelcup.runners.modal
    app: ModuleType  # kernelcup.runners.modal_app
    tmp_path: Path

    @property
    def server(self) -> Any:
        return self.sdk.SERVER

    @property
    def errors(self) -> Any:
        return self.sdk.exception

    def runner(self, settings: Settings) -> Any:
        """A ModalRunner with its default client: the real ``ModalSDK``."""
        return self.runners.ModalRunner(settings)

    def sign_in(self, signed_in: bool = True) -> None:
        self.sdk.config.config.override_locally("token_id", "ak-stub" if signed_in else None)

    def deploy(self, functions: dict[str, Script | Callable[..., Any]], *, timeout: int = 300) -> None:
        """Deploy app ``kernelcup`` with these functions: a Script runs ``scripted_job`` with it,
        a callable is the function's body."""
        app = self.sdk.App("kernelcup")
        for name, what in functions.items():
            env = {self.app.TABLE_ENV: json.dumps(self.app.DEPLOYMENT)}
            body: Callable[..., Any]
            if isinstance(what, Script):
                body, env[modal_functions.SCRIPT_ENV] = modal_functions.scripted_job, what.to_json()
            else:
                body = what
            app.function(image=self.sdk.Image.debian_slim().env(env), name=name, timeout=timeout)(body)
        self.server.deploy(app)

    def gate(self, name: str = "gate") -> Path:
        """A file a scripted harness waits for; create it to let the harness finish."""
        return self.tmp_path / name


@pytest.fixture
def modal_stub(tmp_path: Path) -> Iterator[ModalStub]:
    saved = {name: module for name, module in sys.modules.items() if _ours_or_modal(name)}
    attributes = {name: getattr(kernelcup.runners, name, None) for name in ("modal", "modal_app")}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(STUBS))
    try:
        sdk = importlib.import_module("modal")
    finally:
        sys.path.remove(str(STUBS))
    assert Path(str(sdk.__file__)).is_relative_to(STUBS), sdk.__file__
    stub = ModalStub(sdk, importlib.import_module(OURS[0]), importlib.import_module(OURS[1]), tmp_path)
    stub.server.start(tmp_path / "modal-server")
    stub.sign_in()
    try:
        yield stub
    finally:
        stub.server.stop()
        for name in [name for name in sys.modules if _ours_or_modal(name)]:
            del sys.modules[name]
        sys.modules.update(saved)
        for name, module in attributes.items():
            if module is None:
                vars(kernelcup.runners).pop(name, None)
            else:
                setattr(kernelcup.runners, name, module)


async def until(condition: Callable[[], object], what: str, timeout_s: float = 60.0) -> None:
    """Wait in the event loop until ``condition()`` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        await asyncio.sleep(0.01)


def process_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting to be reaped counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state in ("Z", "X")
