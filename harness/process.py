"""Starting, watching and ending the submission's process.

The child gets: a socket to the harness (its only channel), pipes for stdout and stderr that
the harness drains with a cap, an allow-listed environment (no runner tokens, no spec), its
own session (so the harness can kill everything it started), and, where the harness runs as
root, an unprivileged uid so it can read neither the harness's memory nor its open files
under /proc. The harness itself is made non-dumpable and a child subreaper, so orphaned
grandchildren come back to it and are killed at the end.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import os
import pwd
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.channel import Channel

HARNESS_ROOT = Path(__file__).resolve().parent.parent
STREAM_KEEP = 1 << 20  # bytes of each stream kept (the result shows 16 KiB; the rest a file)
USER_ENV = "KERNELCUP_HARNESS_USER"  # "" or "none" keeps the harness's uid
# Operator switches for a machine where a layer of isolation breaks the GPU (each "0" turns
# one layer off; the result's system.isolation says what was in force).
USERNS_ENV = "KERNELCUP_HARNESS_USERNS"
DUMPABLE_OFF_ENV = "KERNELCUP_HARNESS_NONDUMPABLE"
WATCHDOG_ENV = "KERNELCUP_HARNESS_WATCHDOG_S"  # debugging: dump every thread's stack after N s

_INHERITED_ENV = (
    "PATH",
    "LD_LIBRARY_PATH",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_HOME",
    "CUDA_PATH",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "TORCH_CUDA_ARCH_LIST",
    "CC",
    "CXX",
    "OMP_NUM_THREADS",
    WATCHDOG_ENV,
)

PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36


def harden_harness_process() -> None:
    """Non-dumpable: other processes of our uid cannot read /proc/<pid>/mem, environ or fd.

    Subreaper: if the child double-forks, the orphans become our children, so the final
    cleanup finds and kills them.
    """
    try:
        libc = ctypes.CDLL(None)
        if os.environ.get(DUMPABLE_OFF_ENV) != "0":
            libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _world_readable_path(path: Path) -> bool:
    """Whether an unprivileged user can reach ``path`` (every directory on the way o+x)."""
    try:
        current = path.resolve()
        for parent in [current, *current.parents]:
            mode = parent.stat().st_mode
            if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
                return False
        mode = current.stat().st_mode
        return bool(mode & stat.S_IROTH)
    except OSError:
        return False


def _traversable_by_others(directory: Path) -> bool:
    """Whether an unprivileged user can pass through ``directory`` and all its parents."""
    try:
        return all(p.stat().st_mode & stat.S_IXOTH for p in [directory.resolve(), *directory.resolve().parents])
    except OSError:
        return False


def _gpu_nodes_open_to_all() -> bool:
    for node in Path("/dev").glob("nvidia*"):
        try:
            mode = node.stat().st_mode
        except OSError:
            continue
        if stat.S_ISCHR(mode) and (mode & 0o006) != 0o006:
            return False
    return True


@dataclass(frozen=True)
class Identity:
    uid: int | None
    gid: int | None
    description: str
    userns: bool = False  # the child moves itself into a new user namespace at startup


def child_identity() -> Identity:
    identity = _child_identity()
    if identity.userns and os.environ.get(USERNS_ENV) == "0":
        return Identity(identity.uid, identity.gid, identity.description + ", no user namespace")
    return identity


def _child_identity() -> Identity:
    """Run the child as ``nobody`` when we are root and it can still reach python and torch.

    Otherwise the child enters a new user namespace as its first act (see ``harness/child.py``):
    it keeps its uid for file access, but loses every capability over the harness's
    namespace, so it can no longer open the non-dumpable harness's /proc/<pid>/mem, environ
    or fd even as root.
    """
    if os.geteuid() != 0:
        return Identity(None, None, f"same uid {os.geteuid()}", userns=True)
    wanted = os.environ.get(USER_ENV, "nobody")
    if wanted in ("", "none"):
        return Identity(None, None, "uid 0", userns=True)
    try:
        entry = pwd.getpwnam(wanted)
    except KeyError:
        return Identity(None, None, f"uid 0 (no user {wanted!r})", userns=True)
    torch_spec = importlib.util.find_spec("torch")
    needed = [Path(sys.executable), HARNESS_ROOT / "harness" / "child.py"]
    if torch_spec is not None and torch_spec.origin:
        needed.append(Path(torch_spec.origin))
    blocked = [str(p) for p in needed if not _world_readable_path(p)]
    if blocked:
        return Identity(None, None, f"uid 0 ({wanted} cannot read {blocked[0]})", userns=True)
    if not _traversable_by_others(Path(tempfile.gettempdir())):
        return Identity(None, None, f"uid 0 ({wanted} cannot reach {tempfile.gettempdir()})", userns=True)
    if not _gpu_nodes_open_to_all():
        return Identity(None, None, f"uid 0 (GPU device nodes closed to {wanted})", userns=True)
    return Identity(entry.pw_uid, entry.pw_gid, f"uid {entry.pw_uid} ({wanted})")


def child_environment(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        PYTHONPATH=str(HARNESS_ROOT),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
    )
    env.update(extra)
    return env


class StreamCapture(threading.Thread):
    """Drains one of the child's output pipes, keeping the first ``STREAM_KEEP`` bytes.

    Draining never stops, so a child that prints without end never blocks on a full pipe; what
    is past the cap is counted and dropped.
    """

    def __init__(self, pipe: int) -> None:
        super().__init__(daemon=True)
        self._pipe = pipe
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        with os.fdopen(self._pipe, "rb", buffering=0) as stream:
            while chunk := stream.read(1 << 16):
                room = STREAM_KEEP - len(self.kept)
                if room > 0:
                    self.kept += chunk[:room]
                self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


@dataclass
class Child:
    popen: subprocess.Popen[bytes]
    channel: Channel
    stdout: StreamCapture
    stderr: StreamCapture
    identity: Identity
    started: float = field(default_factory=time.monotonic)

    def exit_status(self, wait_s: float = 2.0) -> int | None:
        try:
            return self.popen.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def finish(self) -> None:
        """Kill the child, its session and any orphan that came back to us; drain its output."""
        _kill_session(self.popen)
        kill_adopted_children()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=5)
        self.channel.close()
        self.stdout.join(timeout=2)
        self.stderr.join(timeout=2)


def spawn(
    command: list[str],
    workdir: Path,
    identity: Identity,
    env: dict[str, str],
    channel_fd_placeholder: str = "{fd}",
) -> Child:
    """Start ``command`` (``{fd}`` is replaced by the child's socket fd) in its own session."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    argv = [part.replace(channel_fd_placeholder, str(theirs.fileno())) for part in command]
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            cwd=workdir,
            env=env,
            pass_fds=(theirs.fileno(),),
            close_fds=True,
            start_new_session=True,
            user=identity.uid,
            group=identity.gid,
            extra_groups=[] if identity.uid is not None else None,
        )
    finally:
        theirs.close()
        os.close(out_write)
        os.close(err_write)
    stdout, stderr = StreamCapture(out_read), StreamCapture(err_read)
    stdout.start()
    stderr.start()
    return Child(popen, Channel(ours), stdout, stderr, identity)


def userns_prefix(identity: Identity) -> list[str]:
    """``unshare --user --`` for a binary child that should leave our user namespace."""
    import shutil

    tool = shutil.which("unshare") if identity.userns and identity.uid is None else None
    return [tool, "--user", "--"] if tool else []


def _kill_session(popen: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(popen.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        popen.kill()


def children_of(pid: int) -> list[int]:
    """The process ids whose parent is ``pid``, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


def kill_adopted_children() -> None:
    """SIGKILL every process whose parent is the harness (orphans adopted as subreaper)."""
    for pid in children_of(os.getpid()):
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, os.WNOHANG)
        except (ProcessLookupError, ChildProcessError, PermissionError):
            pass


def describe_exit(status: int | None) -> str:
    if status is None:
        return "did not exit"
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = f"signal {-status}"
        meaning = {
            "SIGSEGV": "a segmentation fault",
            "SIGBUS": "a bus error",
            "SIGABRT": "an abort",
            "SIGFPE": "a floating-point exception",
            "SIGILL": "an illegal instruction",
            "SIGKILL": "SIGKILL (out of memory, or killed)",
            "SIGXFSZ": "a file-size limit",
        }.get(name, name)
        return f"was killed by {meaning} ({name})"
    return f"exited with code {status}"
