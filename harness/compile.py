"""Building CUDA leaderboards with nvcc, cached by the hash of everything that goes in.

The key covers nvcc's version, the exact flags and every file of the job, so a cache hit is
the same build byte for byte; the cache holds only successful builds, in the job's own scope of
the build caches (its leaderboard, user and source: harness/workspace.py), so a binary a job
could have replaced only ever runs in a later job of the same three. nvcc runs with the child's
identity and environment, in the run's work directory, within the run's deadline.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from kernelcup.harness.process import child_environment
from kernelcup.harness.spec import JobSpec
from kernelcup.harness.workspace import Workspace, job_cache_dir

BINARY = "kernelcup_eval"
MAX_LOG = 64 * 1024


@dataclass
class Build:
    binary: Path | None
    log: str
    cached: bool = False
    seconds: float = 0.0


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").exists():
            return str(Path(home) / "bin" / "nvcc")
    return None


def gpu_arch() -> list[str]:
    """``-arch=sm_XY`` for the visible GPU; nvcc's default when there is none."""
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return [f"-arch=sm_{major}{minor}"]
    except Exception:
        pass
    return []


def nvcc_command(nvcc: str, spec: JobSpec, arch: list[str]) -> list[str]:
    task = spec.task
    command = [nvcc, "-std=c++17", "-O3", "-lineinfo", *arch, "-I", "."]
    for directory in task.include_dirs:
        command += ["-I", directory]
    for name, value in sorted(task.defines.items()):
        command.append(f"-D{name}={value}" if value != "" else f"-D{name}")
    command += list(task.compile_flags)
    command += list(task.sources)
    command += ["-o", BINARY]
    return command


def _cache_key(nvcc: str, command: list[str], spec: JobSpec) -> str:
    digest = hashlib.sha256()
    try:
        version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        version = "unknown"
    digest.update(version.encode())
    digest.update("\0".join(command[1:]).encode())
    for name in sorted(spec.files):
        digest.update(b"\0file\0" + name.encode() + b"\0" + spec.files[name].encode())
    return digest.hexdigest()


def build(spec: JobSpec, workspace: Workspace, deadline: float) -> Build:
    started = time.monotonic()
    nvcc = nvcc_path()
    if nvcc is None:
        return Build(None, "nvcc not found: this machine cannot build CUDA leaderboards")
    missing = [source for source in spec.task.sources if source not in spec.files]
    if not spec.task.sources or missing:
        return Build(None, f"task.yml's config.sources lists files the job lacks: {missing or '(none)'}")
    command = nvcc_command(nvcc, spec, gpu_arch())
    key = _cache_key(nvcc, command, spec)
    cached = job_cache_dir(spec, "nvcc") / key / BINARY  # the job's own scope: no other job runs what it wrote
    target = workspace.work / BINARY
    if cached.is_file():
        shutil.copyfile(cached, target)
        target.chmod(0o755)
        return Build(target, f"(cached build {key[:12]})\n", True, time.monotonic() - started)
    # nvcc reads the submission's source: it runs in the sandbox, so an #include of a server
    # file finds nothing.
    run_command = workspace.sandbox.wrap(command, workspace.work) if workspace.sandbox is not None else command
    passed = workspace.sandbox.pass_fds if workspace.sandbox is not None else ()
    try:
        completed = subprocess.run(
            run_command,
            cwd=workspace.work,
            env=child_environment(workspace.home, {}),
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=max(1.0, deadline - time.monotonic()),
            pass_fds=passed,
            start_new_session=True,
            **workspace.identity.popen_credentials(),
        )
    except subprocess.TimeoutExpired:
        return Build(None, "nvcc timed out", seconds=time.monotonic() - started)
    log = (completed.stdout + completed.stderr).decode("utf-8", errors="replace")
    if len(log) > MAX_LOG:
        log = log[:MAX_LOG] + "\n[... compile output truncated]"
    if completed.returncode != 0 or not target.is_file():
        return Build(
            None,
            log or f"nvcc exited with code {completed.returncode}",
            seconds=time.monotonic() - started,
        )
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(".partial")
        shutil.copyfile(target, partial)
        partial.chmod(0o755)
        partial.replace(cached)
    except OSError:
        pass  # an unwritable cache only costs the next build
    return Build(target, log, False, time.monotonic() - started)


def first_error(log: str) -> str:
    """The first line of a compiler log that says ``error``, for the one-line verdict."""
    for line in log.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    return lines[0][:300] if lines else "no output"
