"""One cgroup per job, where the machine lets the harness make one: memory and process limits.

Best effort by design: a container may mount cgroups read-only, or run the harness in a cgroup
whose controllers cannot be enabled below it. Then the sandbox's rlimits are the limits, and
the result's ``isolation`` says which applied. Ending every process of a job does not depend
on this: the job's PID namespace does it.

A runner that sandboxes the harness (runners/local.py) makes the cgroup itself, one per harness,
and the harness's sandbox joins it: the harness, the leaderboard's code, every process of the
submission and the tmpfs pages they write (charged to the writer's cgroup) share one memory and
one task limit. The harness sees no cgroup file system there; the runner tells it the limits
and hands it a descriptor of the cgroup's OOM counter (:data:`WHOLE_JOB_ENV`), from which it
tells a process the kernel ended for the job's memory limit from one killed otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every mount, from mountinfo."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            parts, tail = left.split(), right.split()
            if len(parts) >= 5 and len(tail) >= 3:
                found.append((parts[4].replace("\\040", " "), tail[0], tail[2]))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup per hierarchy: {"": v2 path, "memory": v1 path, ...}."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _try_write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


@dataclass
class JobCgroup:
    """The cgroup directories a job's processes join (one for v2, one per controller for v1)."""

    paths: list[Path] = field(default_factory=list)
    applied: list[str] = field(default_factory=list)  # e.g. "memory 16 GiB (cgroup v2)"
    memory_bytes: int = 0  # the memory limit, where one was set
    oom_counter: Path | None = None  # memory.events (v2) or memory.oom_control (v1): "oom_kill N"

    @classmethod
    def create(cls, name: str, memory_bytes: int, pids: int) -> JobCgroup:
        group = cls()
        own = _own_paths()
        for mount_point, fstype, options in _mounts():
            if fstype == "cgroup2" and "" in own and not group.paths:
                group._make_v2(Path(mount_point), own[""], name, memory_bytes, pids)
            elif fstype == "cgroup":
                for controller in ("memory", "pids"):
                    if controller in options.split(",") and controller in own:
                        group._make_v1(Path(mount_point), own[controller], controller, name, memory_bytes, pids)
        return group

    def _make_v2(self, mount: Path, own: str, name: str, memory_bytes: int, pids: int) -> None:
        parent = mount / own.lstrip("/")
        enabled = _read(parent / "cgroup.subtree_control").split()
        if "memory" not in enabled or "pids" not in enabled:
            _try_write(parent / "cgroup.subtree_control", "+memory +pids")
        _sweep(parent)
        path = parent / _job_name(name)
        try:
            path.mkdir()
        except OSError:
            return
        self.paths.append(path)
        if _try_write(path / "memory.max", str(memory_bytes)):
            _try_write(path / "memory.swap.max", "0")
            self.applied.append(f"memory {memory_bytes >> 20} MiB (cgroup)")
            self.memory_bytes, self.oom_counter = memory_bytes, path / "memory.events"
        if _try_write(path / "pids.max", str(pids)):
            self.applied.append(f"{pids} tasks (cgroup)")

    def _make_v1(self, mount: Path, own: str, controller: str, name: str, memory_bytes: int, pids: int) -> None:
        _sweep(mount / own.lstrip("/"))
        path = mount / own.lstrip("/") / _job_name(name)
        try:
            path.mkdir()
        except OSError:
            return
        self.paths.append(path)
        if controller == "memory" and _try_write(path / "memory.limit_in_bytes", str(memory_bytes)):
            _try_write(path / "memory.memsw.limit_in_bytes", str(memory_bytes))  # no swap past it
            self.applied.append(f"memory {memory_bytes >> 20} MiB (cgroup)")
            self.memory_bytes, self.oom_counter = memory_bytes, path / "memory.oom_control"
        if controller == "pids" and _try_write(path / "pids.max", str(pids)):
            self.applied.append(f"{pids} tasks (cgroup)")

    def oom_kills(self) -> int:
        """How many of the cgroup's processes the kernel ended for its memory limit."""
        return _oom_kills(_read(self.oom_counter)) if self.oom_counter is not None else 0

    def close(self) -> None:
        """Kill whatever is still in the job's cgroups and remove them."""
        _watched[:] = [group for group in _watched if group is not self]
        for path in self.paths:
            if not _try_write(path / "cgroup.kill", "1"):
                for pid in _read(path / "cgroup.procs").split():
                    with contextlib.suppress(OSError, ValueError):
                        os.kill(int(pid), signal.SIGKILL)
        for path in self.paths:
            for _ in range(50):
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.paths = []
        self.oom_counter = None


def _oom_kills(text: str) -> int:
    """The ``oom_kill N`` line of memory.events (v2) or memory.oom_control (v1)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return 0


# Set by a runner that put the harness in a cgroup of its own making, for the harness only:
# {"applied": [...], "memory_bytes": N, "oom_fd": descriptor of its OOM counter, or -1}.
WHOLE_JOB_ENV = "KERNELCUP_HARNESS_JOB_CGROUP"


@dataclass(frozen=True)
class WholeJob:
    """The limits of the runner's cgroup that the harness and everything of its job are in."""

    applied: tuple[str, ...] = ()
    memory_bytes: int = 0
    oom_fd: int = -1

    @classmethod
    def from_environment(cls) -> WholeJob:
        try:
            told = json.loads(os.environ.get(WHOLE_JOB_ENV, "") or "{}")
            return cls(tuple(str(a) for a in told.get("applied", [])), int(told.get("memory_bytes", 0)),
                       int(told.get("oom_fd", -1)))
        except (ValueError, TypeError, AttributeError):
            return cls()

    def to_environment(self) -> str:
        return json.dumps({"applied": list(self.applied), "memory_bytes": self.memory_bytes, "oom_fd": self.oom_fd})

    def oom_kills(self) -> int:
        if self.oom_fd < 0:
            return 0
        try:
            os.lseek(self.oom_fd, 0, os.SEEK_SET)
            return _oom_kills(os.read(self.oom_fd, 4096).decode(errors="replace"))
        except OSError:
            return 0


_watched: list[JobCgroup] = []  # the job cgroups this harness made (standalone, no runner's cgroup)


def watch(group: JobCgroup) -> None:
    """Count ``group``'s OOM kills in :func:`memory_limit_hit` until it is closed."""
    _watched.append(group)


def memory_limit_hit() -> int:
    """The memory limit in bytes that the kernel ended a process of this harness's job for (the
    runner's whole-job cgroup, else the job's own), or 0 where none was (or none can be read)."""
    whole = WholeJob.from_environment()
    if whole.memory_bytes and whole.oom_kills():
        return whole.memory_bytes
    for group in [g for g in _watched if g.oom_counter is not None]:
        if group.oom_kills():
            return group.memory_bytes
    return 0


def _job_name(name: str) -> str:
    """The harness's pid is in the name, so a later harness knows when it was left behind."""
    return f"kernelcup-{os.getpid()}-{name}"


def _sweep(parent: Path) -> None:
    """Remove the job cgroups of harnesses that died without cleaning up (SIGKILL)."""
    with contextlib.suppress(OSError):
        for stale in parent.glob("kernelcup-*"):
            try:
                os.kill(int(stale.name.split("-")[1]), 0)
                continue  # its harness is alive: the cgroup is in use
            except ProcessLookupError:
                pass
            except (ValueError, IndexError, PermissionError):
                continue
            with contextlib.suppress(OSError):
                _try_write(stale / "cgroup.kill", "1")
                stale.rmdir()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
