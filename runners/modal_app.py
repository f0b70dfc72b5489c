"""The Modal app: one GPU function per GPU kind of the registry, each running the real harness.

Deploy from the repository root, as a module (a file path would put ``runners/`` on sys.path,
where ``runners/modal.py`` would hide the ``modal`` SDK)::

    modal deploy -m kernelcup.runners.modal_app

The functions come from the GPU registry (config/kernelcup.yml): every entry with a
``modal_gpu`` option gets ``run_<name>`` pinned to that exact card type, so adding a GPU kind is
one config entry plus a redeploy. The table is computed where the deploy runs and baked into the
image's environment, so the container defines the very same functions without our config,
``core`` or PyYAML.

The function body is pure: the job spec's JSON in, the harness's stdout lines out. It never
judges them: the result line is signed with the spec's key and checked by the runner.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import modal

TABLE_ENV = "KERNELCUP_MODAL_DEPLOYMENT"
STDERR_KEEP_CHARS = 8000
PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH")
PASSED_ENV_PREFIXES = ("CUDA_", "NVIDIA_")
# The container's CUDA toolkit (nvcc for CUDA leaderboards) and the bot's own torch pin.
CUDA_IMAGE = "nvidia/cuda:12.8.1-devel-ubuntu22.04"
PYTHON = "3.11"
PACKAGES = ("torch==2.13.0", "numpy>=1.26")  # torch brings its Triton
# Our code in the image. Modal mounts this app's top package (``kernelcup``) by itself, but walks
# it without following links: from a checkout, where kernelcup/runners and kernelcup/harness are
# links, that mount holds only kernelcup/__init__.py. These two are what the container imports.
IMAGE_SOURCES = ("kernelcup.runners", "kernelcup.harness")

if "runners" in Path(modal.__file__).parts:  # pragma: no cover - a deploy by file path
    raise ImportError("deploy with `modal deploy -m kernelcup.runners.modal_app` from the repository root")


@dataclass(frozen=True)
class GpuFunction:
    """One deployed function: its Modal name, the exact card, its hard timeout."""

    name: str
    gpu: str  # Modal's GPU string, e.g. "H100!" (the "!" forbids an upgrade to another card)
    timeout_s: int  # Modal's own limit, from kernelcup.core.pipeline.timeouts.platform_timeout_s
    max_containers: int | None = None
    scaledown_s: int = 60


@dataclass
class _Started:
    process: subprocess.Popen[str]
    workdir: str


# One harness started ahead of the container's next call (torch imported, CUDA contexts up): a
# container serves one call at a time and stays warm for ``scaledown_s`` between calls.
_standby: list[_Started] = []


def _start(command: list[str] | None) -> _Started:
    root = str(Path(__file__).absolute().parents[2].resolve())  # where `kernelcup` is importable from
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENV or k.startswith(PASSED_ENV_PREFIXES)}
    env["PYTHONPATH"] = root
    env["PYTHONUNBUFFERED"] = "1"
    workdir = tempfile.mkdtemp(prefix="kernelcup-")
    process = subprocess.Popen(
        command or [sys.executable, "-m", "kernelcup.harness"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=workdir,
        start_new_session=True,
    )
    return _Started(process, workdir)


def _take(command: list[str] | None) -> _Started:
    while _standby:
        started = _standby.pop()
        if started.process.poll() is None:
            return started
        shutil.rmtree(started.workdir, ignore_errors=True)
    return _start(command)


def run_harness(
    spec_json: str,
    kill_after_s: float,
    report: Callable[[str], None] | None = None,
    command: list[str] | None = None,
    standby: bool = False,
) -> dict[str, Any]:
    """Run ``python -m kernelcup.harness`` on one spec; its stdout lines, exit code and stderr's tail.

    ``kill_after_s`` (from kernelcup.core.pipeline.timeouts) exceeds the harness's own limit, so normally the harness
    reports its own timeout; this kill is for a harness that hangs. Progress lines go to
    ``report`` as they come. With ``standby`` the call takes the harness started after the
    previous call, if one is waiting, and starts the next one when it is done.
    """
    started = _take(command) if standby else _start(command)
    process, workdir = started.process, started.workdir
    lines: list[str] = []
    stderr: list[str] = []
    # Drained beside stdout: a full stderr pipe would block the harness.
    drain = threading.Thread(target=lambda: stderr.append(process.stderr.read() if process.stderr else ""))
    drain.start()
    try:
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(spec_json)
            process.stdin.close()
        except BrokenPipeError:
            pass  # it died at once; the exit code and stderr say why
        with _kill_group_after(process, kill_after_s):
            for line in process.stdout:
                lines.append(line.rstrip("\n"))
                if report is not None and line.startswith('{"event": "progress"'):
                    report(line.rstrip("\n"))
            process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        drain.join()
        shutil.rmtree(workdir, ignore_errors=True)
    if standby:
        with suppress(OSError):
            _standby.append(_start(command))
    return {"lines": lines, "returncode": process.returncode, "stderr": "".join(stderr)[-STDERR_KEEP_CHARS:]}


@contextmanager
def _kill_group_after(process: subprocess.Popen[str], after_s: float) -> Iterator[None]:
    """SIGKILL the harness's whole process group (the submission's too) once ``after_s`` pass."""

    def kill() -> None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    timer = threading.Timer(after_s, kill)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _report_to_dict(line: str) -> None:
    """Publish the latest progress line under this call's id, for the runner's polls."""
    call_id = modal.current_function_call_id()
    if call_id:
        with suppress(Exception):  # progress is a courtesy: it never fails the run
            modal.Dict.from_name(PROGRESS_DICT, create_if_missing=True).put(call_id, line)


def run_job(spec_json: str, kill_after_s: float) -> dict[str, Any]:
    """The GPU function's body (the same for every card)."""
    return run_harness(
        spec_json, kill_after_s, report=None if modal.is_local() else _report_to_dict, standby=not modal.is_local()
    )


def _deployment() -> dict[str, Any]:
    """What kernelcup.runners.modal.deployment derives from the config; in the container (whose image
    carries it, and which has neither ``core`` nor our config), as baked in at deploy."""
    if TABLE_ENV in os.environ:
        return dict(json.loads(os.environ[TABLE_ENV]))
    from kernelcup.core.config import load_settings
    from kernelcup.runners.modal import deployment

    return deployment(load_settings())


DEPLOYMENT = _deployment()
APP_NAME: str = DEPLOYMENT["app"]
PROGRESS_DICT: str = DEPLOYMENT["progress_dict"]  # function-call id -> the latest progress line
FUNCTIONS = [GpuFunction(**entry) for entry in DEPLOYMENT["functions"]]

image = (
    modal.Image.from_registry(CUDA_IMAGE, add_python=PYTHON)
    .pip_install(*PACKAGES)
    .env({TABLE_ENV: json.dumps(DEPLOYMENT)})
    .add_local_python_source(*IMAGE_SOURCES)
)
app = modal.App(APP_NAME, image=image)

GPU_FUNCTIONS: dict[str, modal.Function[..., Any, Any]] = {
    spec.name: app.function(
        gpu=spec.gpu,
        timeout=spec.timeout_s,
        retries=0,  # a crashed run is reported, never silently repeated (a ranked run twice)
        max_containers=spec.max_containers,
        scaledown_window=spec.scaledown_s,
        name=spec.name,
    )(run_job)
    for spec in FUNCTIONS
}
