"""Starting, watching and ending the submission's process.

Every process that runs a submission's code (the Python child, a compiled CUDA driver, nvcc on
the submission's source, the profiler) starts through the sandbox (``harness/sandbox.py``): its
own user, mount, PID, network, IPC and UTS namespaces, a root file system with only read-only
system and Python folders, its own job folders and the GPU, a cgroup where the machine allows
one, rlimits, no capability. It talks to the harness over a socket and two output pipes that
the harness drains with a cap; its environment is allow-listed (no runner tokens, no spec).
Where the machine cannot give namespaces the job is refused, unless the operator turned the
sandbox off for a machine that runs only trusted code.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import pwd
import signal
import site
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelcup.harness import uids
from kernelcup.harness.cgroups import WHOLE_JOB_ENV, JobCgroup, WholeJob, memory_limit_hit, watch
from kernelcup.harness.channel import Channel
from kernelcup.harness.spec import Status
from kernelcup.harness.verdict import RunEnded

# Where ``kernelcup`` is imported from: a checkout or site-packages. Only the root is resolved:
# in a checkout kernelcup/harness is a link to harness/, and the link is how kernelcup.harness is found.
IMPORT_ROOT = Path(__file__).absolute().parents[2].resolve()
HARNESS_DIR = Path(__file__).resolve().parent  # the folder the harness really lives in
STREAM_KEEP = 1 << 20  # bytes of each stream kept (the result shows 16 KiB; the rest a file)
# A root harness's jobs run as a uid of their own (harness/uids.py) unless this names a user to
# run them as instead (``nobody``, say). Without the sandbox: "" or "none" keeps the harness's uid.
USER_ENV = "KERNELCUP_HARNESS_USER"
# Operator switches for a machine where a layer of isolation breaks the GPU (each "0" turns
# one layer off; the result's system.isolation says what was in force).
USERNS_ENV = "KERNELCUP_HARNESS_USERNS"
DUMPABLE_OFF_ENV = "KERNELCUP_HARNESS_NONDUMPABLE"
# "0": no system-call filter in the job's sandbox (harness/seccomp.py). Read by the harness when
# it starts a job's process, never by anything the job runs; the tests' control runs use it.
SECCOMP_ENV = "KERNELCUP_HARNESS_SECCOMP"
WATCHDOG_ENV = "KERNELCUP_HARNESS_WATCHDOG_S"  # debugging: dump every thread's stack after N s
# Debugging: "1" runs the submission's process under cProfile; its profile (cumulative order)
# ends that process's stdout, so it comes back in the result's stdout.
PROFILE_ENV = "KERNELCUP_HARNESS_PROFILE"
CACHE_ENV = "KERNELCUP_CACHE_DIR"  # the build caches (harness/workspace.py)
BYTECODE_ENV = "KERNELCUP_HARNESS_BYTECODE"  # "off", "on", or "auto": where torch has no bytecode
# Where bytecode built outside every job is kept (harness/bytecode.py), one folder per
# interpreter and torch; default: ``harness-bytecode`` in the cache folder.
BYTECODE_DIR_ENV = "KERNELCUP_HARNESS_BYTECODE_DIR"
BYTECODE_MANIFEST = "MANIFEST"  # written last by the build: every file's SHA-256
# "" (default): the sandbox, refusing jobs where it cannot be had; "own-uid": the sandbox as an
# ordinary user gets it (the job keeps the harness's uid outside its namespace; for tests);
# "off": no sandbox, for a machine that only ever runs its owner's code.
SANDBOX_ENV = "KERNELCUP_HARNESS_SANDBOX"
HIDE_ENV = "KERNELCUP_SANDBOX_HIDE"  # folders a runner wants covered if a bind brought them in
OUTER_ENV = "KERNELCUP_HARNESS_OUTSIDE"  # set by a runner that sandboxed the harness: who it is outside
MEMORY_ENV = "KERNELCUP_SANDBOX_MEMORY_MB"
FILE_SIZE_ENV = "KERNELCUP_SANDBOX_FILE_MB"
TASKS_ENV = "KERNELCUP_SANDBOX_TASKS"
SANDBOX_SCRIPT = Path(__file__).resolve().parent / "sandbox.py"
INSIDE_ID = 1000  # the job's uid and gid inside its user namespace


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "kernelcup"


_kept_bytecode: Path | None = None  # the folder keep_bytecode chose, for the job's processes


def bytecode_wanted() -> bool:
    """Whether the harness's processes should read bytecode kept apart from the installs:
    ``KERNELCUP_HARNESS_BYTECODE=on``, or ``auto`` where torch's install has none of its own."""
    wanted = os.environ.get(BYTECODE_ENV, "auto")
    return wanted == "on" or (wanted == "auto" and _lacks_bytecode())


def bytecode_folder() -> Path:
    """Where bytecode for this interpreter and this torch is built (``harness/bytecode.py``):
    another interpreter or an upgraded torch gets a folder of its own."""
    configured = os.environ.get(BYTECODE_DIR_ENV)
    root = Path(configured) if configured else cache_root() / "harness-bytecode"
    parts = [sys.version, sys.executable]
    with contextlib.suppress(ImportError, ValueError, OSError):
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.origin:
            info = os.stat(spec.origin)
            parts += [spec.origin, str(info.st_mtime_ns), str(info.st_size)]
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]
    return root / f"{sys.implementation.cache_tag}-{digest}"


def keep_bytecode() -> None:
    """Where torch's install has no bytecode (``PYTHONDONTWRITEBYTECODE``, as on GPU images whose
    packages were installed without it), read the bytecode built for it outside every job.

    Without it every process of every job compiles torch's modules from source, seconds per job
    (JOURNAL.md, Bytecode). The harness runs a
    leaderboard's code, so it only reads that folder, and only where it cannot change it (the
    local runner binds it read-only): code planted in a ``.pyc`` would run in every later job's
    harness and submission process. Nothing writes bytecode in a job.
    """
    global _kept_bytecode
    if sys.pycache_prefix or not bytecode_wanted():
        return
    folder = bytecode_folder()
    if not (folder / BYTECODE_MANIFEST).is_file() or not read_only_to_us(folder):
        return
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = True
    _kept_bytecode = folder


def read_only_to_us(folder: Path) -> bool:
    """Whether this process cannot change ``folder``: a read-only mount, or another user's
    folder it may not write (root may write any, and an owner may make its own writable)."""
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return True
        owner = folder.stat().st_uid
    except OSError:
        return False
    return os.geteuid() != 0 and owner != os.geteuid() and not os.access(folder, os.W_OK)


def _lacks_bytecode() -> bool:
    """Whether torch's modules would be compiled from source in every process: its install holds
    no bytecode (installed without it, and either read-only or run where the interpreter writes
    none). Where it has bytecode, that is read as it is: a cache of our own would start empty."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    return not os.path.exists(importlib.util.cache_from_source(spec.origin))


def bytecode_cache() -> Path | None:
    """The bytecode the harness reads (:func:`keep_bytecode`), for the submission's process to read."""
    return _kept_bytecode


# Every Python process the harness starts for a job runs with these: ``-P``, no script or working
# folder on sys.path (the job's folder holds the submission's files); ``-s``, no user site folder.
# HOME is the job's own and the submission can write there: without ``-s`` a system Python (not
# a virtual environment) imports ``~/.local/lib/pythonX.Y/site-packages/usercustomize.py`` and
# runs its ``.pth`` files at start-up, so code a submission planted in one process would run in
# the job's next one (a ranked round's fresh process, a rank group) before the harness's own
# code, ahead of the timing primitives it captures. PYTHONNOUSERSITE (child_environment) covers
# the processes those start.
PYTHON_FLAGS = ("-P", "-s")
# torch's kernel cache (``~/.cache/torch/kernels``, NVRTC builds of jiterator kernels) is off in
# the job's processes: it would sit in the job's HOME, which the submission writes, and a build
# planted from one process would be loaded as torch's own kernel by the job's next process (a
# fresh ranked round). The driver's own cache of PTX it compiled (``~/.nv/ComputeCache``) stays
# on: with it off, a GPU newer than the installed torch would compile every torch kernel it
# uses again in every process (SECURITY.md, Known limits).
NO_KERNEL_CACHE = {"USE_PYTORCH_KERNEL_CACHE": "0"}

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
    "KERNELCUP_HARNESS_RECORD",  # which source of the GPU's record the child reads (harness/record.py)
    "KERNELCUP_HARNESS_CUPTI_LIB",  # the libcupti it loads (harness/cupti.py)
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
    uid: int | None  # the job's uid outside its namespace, when the harness chose one (as root)
    gid: int | None
    description: str
    userns: bool = False  # no sandbox: the child moves itself into a new user namespace
    sandbox: bool = False
    refused: str = ""  # why this machine cannot run a job safely (the job is refused)
    lease: uids.Lease | None = None  # holds ``uid`` for this job alone while open (harness/uids.py)

    def popen_credentials(self) -> dict[str, Any]:
        """``subprocess.Popen`` arguments for the uid drop; the sandbox maps ids itself."""
        if self.sandbox or self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def sandboxed() -> bool:
    """Whether this machine's jobs get the sandbox (without reserving a uid for one)."""
    return os.environ.get(SANDBOX_ENV, "") != "off" and not namespaces_unavailable()


def child_identity() -> Identity:
    """Who the job's processes are. A root harness's job gets a uid of its own, reserved for as
    long as this process (or a sandbox launcher it hands the lease to) lives."""
    choice = os.environ.get(SANDBOX_ENV, "")
    if choice == "off":
        identity = _child_identity()
        if identity.userns and os.environ.get(USERNS_ENV) == "0":
            identity = Identity(identity.uid, identity.gid, identity.description + ", no user namespace")
        return Identity(
            identity.uid, identity.gid, f"no sandbox ({SANDBOX_ENV}=off), {identity.description}", identity.userns
        )
    reason = namespaces_unavailable()
    if reason:
        return Identity(None, None, f"no sandbox: {reason}", refused=reason)
    if os.environ.get(OUTER_ENV):  # the runner started this harness in a sandbox of its own
        described = f"sandbox (namespaces) in the harness's sandbox, {os.environ[OUTER_ENV]}"
        return Identity(None, None, described, sandbox=True)
    if os.geteuid() != 0 or choice == "own-uid":
        return Identity(None, None, f"sandbox (namespaces), uid {os.geteuid()} outside", sandbox=True)
    wanted = os.environ.get(USER_ENV, "")
    if not wanted:
        return _leased_identity()
    try:
        entry = pwd.getpwnam(wanted)
    except KeyError:
        return Identity(None, None, f"sandbox (namespaces), uid 0 outside (no user {wanted!r})", sandbox=True)
    gid = entry.pw_gid if _gpu_nodes_open_to_all() else _gpu_group(entry.pw_gid)
    return Identity(entry.pw_uid, gid, f"sandbox (namespaces), uid {entry.pw_uid} ({wanted}) outside", sandbox=True)


def _leased_identity() -> Identity:
    """A root harness's job: a uid of ``KERNELCUP_SANDBOX_UID_RANGE`` no other job holds, the same
    number for its gid (or the GPU's group where its device nodes are closed to others)."""
    try:
        wanted = uids.configured_range()
    except uids.UidError as exc:
        return Identity(None, None, f"no sandbox: {exc}", refused=str(exc))
    if not uids.mapped(wanted):
        # A container may map fewer uids: without a range of the operator's, take its highest.
        fallback = None if os.environ.get(uids.RANGE_ENV) else uids.highest_mapped(len(wanted))
        if fallback is None:
            why = (f"the uids {wanted.start}-{wanted.stop - 1} ({uids.RANGE_ENV}) do not exist in this machine's "
                   f"user namespace: set {uids.RANGE_ENV} to uids it has, or {USER_ENV} to a user to run jobs as")
            return Identity(None, None, f"no sandbox: {why}", refused=why)
        wanted = fallback
    try:
        lease = uids.lease(wanted)
    except (uids.UidError, OSError) as exc:
        why = f"no uid could be reserved for the job: {exc}"
        return Identity(None, None, f"no sandbox: {why}", refused=why)
    gid = lease.uid if _gpu_nodes_open_to_all() else _gpu_group(lease.uid)
    described = f"sandbox (namespaces), uid {lease.uid} outside (the job's own, of {wanted.start}-{wanted.stop - 1})"
    return Identity(lease.uid, gid, described, sandbox=True, lease=lease)


def namespaces_unavailable() -> str:
    """Why this machine cannot give a job its own namespaces, or "" when it can (as far as the
    settings tell; a refusal at launch is reported with the job)."""
    def setting(path: str) -> str:
        try:
            return Path(path).read_text().strip()
        except OSError:
            return ""

    if setting("/proc/sys/user/max_user_namespaces") == "0":
        return "user namespaces are disabled (user.max_user_namespaces = 0)"
    if os.geteuid() != 0:
        if setting("/proc/sys/kernel/unprivileged_userns_clone") == "0":
            return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
        if setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
            return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
    return ""


def _gpu_group(default: int) -> int:
    """The group that owns the GPU's device nodes, when they are closed to others."""
    with contextlib.suppress(OSError):
        return Path("/dev/nvidiactl").stat().st_gid
    return default


def _child_identity() -> Identity:
    """No sandbox: run the child as ``nobody`` when we are root and it can still reach python
    and torch, else in its own user namespace (see ``harness/child.py``)."""
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
    needed = [Path(sys.executable), HARNESS_DIR / "child.py"]
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


# /opt/nvidia: where Nsight Compute installs itself beside the CUDA toolkit.
_SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt/nvidia")


@functools.lru_cache(maxsize=1)
def _readonly_folders() -> tuple[str, ...]:
    """What a job may read: the system, Python and its packages, CUDA, compilers, the harness;
    shallowest first, a folder inside another too (the sandbox binds each folder once, and binds
    one inside another again over a cover of a folder on the way to it, ``harness/sandbox.py``).

    Never the repository or the runner's folders (the database, ``var/``): only ``harness/``
    of the repository is bound, with ``kernelcup/`` (its ``__init__.py`` and links, of which only
    ``kernelcup/harness`` leads anywhere inside), and a folder on the way to them is never bound whole.
    """
    wanted = list(_SYSTEM_FOLDERS)
    wanted += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    wanted += [str(Path(sys.executable).resolve().parent.parent)]
    wanted += [*site.getsitepackages(), site.getusersitepackages()]
    bytecode = bytecode_cache()
    if bytecode is not None:
        wanted.append(str(bytecode))
    for module in ("torch", "triton", "numpy"):
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(module)
            if spec is not None and spec.origin:
                wanted.append(str(Path(spec.origin).resolve().parent.parent))
    for variable in ("PATH", "LD_LIBRARY_PATH"):
        wanted += [_prefix_of(entry) for entry in os.environ.get(variable, "").split(os.pathsep) if entry]
    for variable in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(variable):
            wanted.append(os.environ[variable])
    for variable in ("CC", "CXX", "CUDAHOSTCXX"):
        if os.environ.get(variable):
            wanted.append(_prefix_of(str(Path(os.environ[variable]).parent)))
    repository = IMPORT_ROOT
    # An installed kernelcup lives in site-packages, a folder of packages like torch's: bound with
    # the rest of Python. Only a checkout is the bot's own folder (its database, var/).
    installed = repository in {Path(p).resolve() for p in [*site.getsitepackages(), site.getusersitepackages()]}
    chosen: list[str] = []
    for raw in wanted:
        path = Path(raw)
        if not path.is_absolute() or not path.exists():
            continue
        # /bin -> usr/bin is recreated as a link; anything else is bound where it really is
        real = path if raw in _SYSTEM_FOLDERS and path.is_symlink() else path.resolve()
        if real == Path("/") or (not installed and (real == repository or real in repository.parents)):
            continue
        chosen.append(str(real))
    if not installed:
        chosen += [str(repository / "kernelcup"), str(HARNESS_DIR)]
    return tuple(sorted(set(chosen), key=lambda p: (p.count("/"), p)))


def _prefix_of(folder: str) -> str:
    """The installation a ``bin`` folder belongs to (``/opt/gcc/bin`` -> ``/opt/gcc``: gcc needs
    its ``libexec``), when that is what its parent looks like; else the folder itself."""
    path = Path(folder)
    parent = path.parent
    installed = any((parent / name).is_dir() for name in ("libexec", "lib", "include"))
    if path.name in ("bin", "sbin", "lib64", "lib") and parent not in (Path.home(), Path("/")) and installed:
        return str(parent)
    return folder


def _gpu_devices() -> list[str]:
    return sorted(str(p) for p in Path("/dev").glob("nvidia*"))


def _memory_total() -> int:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 16 << 30


def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def job_limits() -> tuple[int, int]:
    """A job's memory limit in bytes and its task limit (README, *The sandbox*):
    ``KERNELCUP_SANDBOX_MEMORY_MB`` (default ¾ of this machine's memory, at most 64 GiB) and
    ``KERNELCUP_SANDBOX_TASKS`` (default 1024)."""
    memory = _env_int(MEMORY_ENV, min(_memory_total() * 3 // 4 >> 20, 64 << 10)) << 20
    return memory, _env_int(TASKS_ENV, 1024)


# A job's processes raise their own OOM score to the most (raising needs no privilege): where the
# job's memory limit is reached, the kernel ends one of them, never the harness that reports it.
JOB_OOM_SCORE_ADJ = 1000


@dataclass
class Sandbox:
    """The sandbox of one job: its root mount point, its writable folders, its cgroup.

    ``moved``: writable folders the job sees at another path (outside, inside), such as its
    build caches at one fixed path, so a build made by one job is still valid in the next.
    ``readonly``: folders bound read-only besides the system's and Python's (bytecode built
    outside every job, for a harness's own sandbox).
    """

    identity: Identity
    root: Path
    writable: list[Path]
    cgroup: JobCgroup
    memory_bytes: int
    tasks: int
    moved: list[tuple[Path, str]] = field(default_factory=list)
    readonly: list[Path] = field(default_factory=list)
    # The runner's own folders to cover should a bind bring them in; by default those the runner
    # named to this harness (HIDE_ENV). A harness's own sandbox is made by the runner, which names them.
    hide: list[str] = field(default_factory=lambda: [p for p in os.environ.get(HIDE_ENV, "").split(os.pathsep) if p])
    tmp_bytes: int = 1 << 30  # the size of its /tmp and /var/tmp (tmpfs, charged to its memory cgroup)
    _policy_fd: int | None = None  # the policy every process of the job is started with
    _policy_for: tuple[str, bool] | None = None  # its (cwd, harness)

    @classmethod
    def create(
        cls, identity: Identity, base: Path, writable: list[Path], moved: list[tuple[Path, str]] | None = None
    ) -> Sandbox:
        root = base / "root"
        root.mkdir(mode=0o700, exist_ok=True)
        memory, tasks = job_limits()
        cgroup = JobCgroup.create(base.name, memory, tasks)
        watch(cgroup)
        return cls(identity, root, writable, cgroup, memory, tasks, list(moved or []))

    def describe(self) -> str:
        whole = [f"{applied.removesuffix(' (cgroup)')} for the whole job (the runner's cgroup)"
                 for applied in WholeJob.from_environment().applied]
        limits = [*whole, *self.cgroup.applied]
        if not any("memory" in applied for applied in limits):
            limits.append(f"memory {self.memory_bytes >> 20} MiB (rlimit)")
        if not any("tasks" in applied for applied in limits):
            limits.append(f"{self.tasks} tasks (rlimit)")
        limits.append(f"files up to {_env_int(FILE_SIZE_ENV, 4096)} MiB (rlimit)")
        filtered = "system-call filter" if syscall_filter() else f"no system-call filter ({SECCOMP_ENV}=0)"
        return f"{self.identity.description}; {filtered}; limits: {', '.join(limits)}"

    @property
    def pass_fds(self) -> tuple[int, ...]:
        """The descriptors a process started with :meth:`wrap`'s command must inherit
        (``subprocess.Popen(pass_fds=...)``): the policy, and the lease on the job's uid, which
        its sandbox's launcher keeps while it lives."""
        if self._policy_fd is None:
            raise RuntimeError("no command was wrapped yet")
        lease = self.identity.lease
        return (self._policy_fd, *([lease.fd] if lease is not None else []))

    def wrap(self, command: list[str], cwd: Path, harness: bool = False) -> list[str]:
        """``command`` as the sandbox launcher runs it, in ``cwd``; ``harness``: the harness's
        own sandbox, whose limits are those of the jobs' sandboxes inside it, and which has no
        system-call filter (it builds the jobs' sandboxes). Start it with :attr:`pass_fds`.

        The policy goes to the launcher in a file descriptor, never on its command line (the
        job's ``/proc/1/cmdline``, anyone's ``ps``): it names the bot's own folders."""
        if self._policy_for is None:
            self._policy_fd = _policy_file(self._policy(cwd, harness))
            self._policy_for = (str(cwd), harness)
        elif self._policy_for != (str(cwd), harness):
            raise ValueError(f"a job's processes share one policy: {cwd} is not {self._policy_for[0]}")
        return [sys.executable, "-I", "-S", str(SANDBOX_SCRIPT), f"--policy-fd={self._policy_fd}", *command]

    def _policy(self, cwd: Path, harness: bool) -> dict[str, Any]:
        gpu = _gpu_devices()
        limits = {"CORE": 0} if harness else {
            "NOFILE": 4096,
            "NPROC": self.tasks,
            "FSIZE": _env_int(FILE_SIZE_ENV, 4096) << 20,
            "CORE": 0,
        }
        counted = [*self.cgroup.applied, *WholeJob.from_environment().applied]
        if not harness and not any("memory" in applied for applied in counted):
            # Only where no cgroup counts the job's memory: an address-space limit also refuses
            # what is reserved and never used. CUDA reserves far more than it uses: with a GPU
            # the limit is on private writable memory (RLIMIT_DATA) instead of all of it (RLIMIT_AS).
            limits["DATA" if gpu else "AS"] = self.memory_bytes
        identity = self.identity
        hidden = self.hide
        policy = {
            "root": str(self.root),
            "readonly": sorted({*_readonly_folders(), *map(str, self.readonly)}, key=lambda p: (p.count("/"), p)),
            "hide": hidden,
            "writable": [str(p) for p in self.writable],
            "moved": [[str(outside), inside] for outside, inside in self.moved],
            "devices": gpu,
            "cgroups": [str(p) for p in self.cgroup.paths],
            "inside_uid": INSIDE_ID,
            "inside_gid": INSIDE_ID,
            "outside_uid": identity.uid if identity.uid is not None else os.geteuid(),
            "outside_gid": identity.gid if identity.gid is not None else os.getegid(),
            "cwd": str(cwd),
            "limits": limits,
            "tmp_bytes": self.tmp_bytes,
            "shm_bytes": 1 << 30,
            "oom_score_adj": None if harness else JOB_OOM_SCORE_ADJ,
            # A job's launcher dies with the harness (so its keeper, init and job do too), even
            # when the harness is SIGKILLed; the harness's own sandbox is the runner's to end.
            "parent_pid": None if harness else os.getpid(),
            "syscall_filter": not harness and syscall_filter(),
            # The launcher keeps the lease on the job's uid open until it ends (a runner hands a
            # harness's lease over to it): no other job gets the uid while this one runs.
            "keep_fds": [identity.lease.fd] if identity.lease is not None else [],
        }
        return policy

    def close(self) -> None:
        self.cgroup.close()
        self.close_policy()

    def close_policy(self) -> None:
        """Close this process's copy of the policy (its launchers read their own)."""
        if self._policy_fd is not None:
            os.close(self._policy_fd)
            self._policy_fd = None


def syscall_filter() -> bool:
    """Whether jobs get the system-call filter (``harness/seccomp.py``): always, unless the
    operator (or a test's control run) set ``KERNELCUP_HARNESS_SECCOMP=0`` for the harness."""
    return os.environ.get(SECCOMP_ENV) != "0"


def _policy_file(policy: dict[str, Any]) -> int:
    """A descriptor of an anonymous file holding ``policy`` (read from its start by each launcher)."""
    fd = os.memfd_create("kernelcup-sandbox-policy", os.MFD_CLOEXEC)
    data = json.dumps(policy).encode()
    written = 0
    while written < len(data):
        written += os.write(fd, data[written:])
    return fd


@dataclass
class HarnessLaunch:
    """How a runner starts a harness (:func:`harness_sandboxed`): ``command`` with ``env`` added
    to its environment and ``pass_fds`` inherited; :meth:`started` once it has been started (or
    failed to start), which closes the runner's copies of those descriptors."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)
    sandbox: Sandbox | None = None
    extra_fds: tuple[int, ...] = ()  # the whole-job cgroup's OOM counter, for the harness to read

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return (*(self.sandbox.pass_fds if self.sandbox is not None else ()), *self.extra_fds)

    def started(self) -> None:
        """The harness runs: close our copies of its descriptors. Its cgroup (the runner's) stays."""
        for fd in self.extra_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.extra_fds = ()
        if self.sandbox is not None:
            self.sandbox.close_policy()
            if self.sandbox.identity.lease is not None:  # the harness's sandbox launcher holds it now
                self.sandbox.identity.lease.release()


def harness_sandboxed(
    command: list[str],
    folder: Path,
    readonly: list[Path] | None = None,
    hide: list[str] | None = None,
    cgroup: JobCgroup | None = None,
) -> HarnessLaunch:
    """For a runner on the bot's machine: ``python -m kernelcup.harness`` in a sandbox of its own.

    A leaderboard's own code (``reference.py``) runs in the harness, so the harness too must not
    reach the bot: it sees its ``folder`` (its temporary folders and its job's build caches,
    written), read-only Python and CUDA and the ``readonly`` folders (the bytecode built outside
    every job), the GPU; no network, no other process, no other job's caches, and none of the
    runner's own folders in ``hide`` (its database's, say) where a read-only bind would bring
    one in (tests/pipeline/test_local_runner.py, the installation fixture). As root it runs
    as a uid of its own (harness/uids.py), which its job keeps. Each job's submission then gets
    its own sandbox inside this one. Where no sandbox can be had the command is returned as it
    is: the harness refuses the job itself, with the reason.

    ``cgroup``: the runner's cgroup for the whole job (the harness and all it starts), which the
    harness's sandbox joins; the harness learns its limits and gets a descriptor of its OOM
    counter (``harness/cgroups.py``), and its ``/tmp``, where it keeps the job's folders, is a
    tmpfs the size of the job's memory limit, whose pages count against that limit.
    """
    identity = child_identity()
    if not identity.sandbox:
        if identity.lease is not None:
            identity.lease.release()
        return HarnessLaunch(command)
    folder.mkdir(parents=True, exist_ok=True)
    for path in [folder, *(p for p in folder.rglob("*") if not p.is_symlink())]:
        if identity.uid is not None:
            os.chown(path, identity.uid, identity.gid if identity.gid is not None else -1)
    cgroup = cgroup or JobCgroup()
    outer = Sandbox(
        identity, folder / "harness-root", [folder], cgroup, 0, 0, readonly=list(readonly or []),
        hide=list(hide or []), tmp_bytes=cgroup.memory_bytes or 1 << 30,
    )
    outer.root.mkdir(mode=0o700, exist_ok=True)
    outside = identity.description.removeprefix("sandbox (namespaces), ")
    env = {OUTER_ENV: outside}
    extra: tuple[int, ...] = ()
    if cgroup.applied:
        oom_fd = -1
        if cgroup.oom_counter is not None:
            with contextlib.suppress(OSError):
                oom_fd = os.open(cgroup.oom_counter, os.O_RDONLY | os.O_CLOEXEC)
        extra = (oom_fd,) if oom_fd >= 0 else ()
        env[WHOLE_JOB_ENV] = WholeJob(tuple(cgroup.applied), cgroup.memory_bytes, oom_fd).to_environment()
    return HarnessLaunch(outer.wrap(command, folder, harness=True), env, outer, extra)


def sandbox_failure(stderr: str) -> RunEnded | None:
    """The job's end where a process's stderr holds the sandbox launcher's own complaint: this
    machine cannot set the sandbox up, and another start would fail the same way."""
    from kernelcup.harness.sandbox import SETUP_PREFIX

    for line in stderr.splitlines():
        if line.startswith(SETUP_PREFIX):
            why = line[len(SETUP_PREFIX) :]
            return RunEnded(Status.ERROR, f"could not sandbox the submission on this machine: {why}", repeats=True)
    return None


def child_environment(home: Path, extra: dict[str, str]) -> dict[str, str]:
    env = {key: os.environ[key] for key in _INHERITED_ENV if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        PYTHONPATH=str(IMPORT_ROOT),
        PYTHONUNBUFFERED="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        PYTHONNOUSERSITE="1",
        **NO_KERNEL_CACHE,
    )
    kept = bytecode_cache()
    if kept is not None:  # read, never written: PYTHONDONTWRITEBYTECODE stays
        env["PYTHONPYCACHEPREFIX"] = str(kept)
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

    def finish(self, spare: Collection[int] = ()) -> None:
        """Kill the child, its session and any orphan that came back to us (but the processes
        ``spare`` names: others of the job still waiting for their turn); drain its output."""
        if os.environ.get(PROFILE_ENV) == "1":  # a profiled child writes its profile as it exits
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=15)
        _kill_session(self.popen)
        kill_adopted_children(spare)
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
    sandbox: Sandbox | None = None,
    channel_fd_placeholder: str = "{fd}",
) -> Child:
    """Start ``command`` (``{fd}`` is replaced by the child's socket fd) in its own session,
    inside ``sandbox`` when there is one."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    argv = [part.replace(channel_fd_placeholder, str(theirs.fileno())) for part in command]
    passed: tuple[int, ...] = (theirs.fileno(),)
    if sandbox is not None:
        argv = sandbox.wrap(argv, workdir)
        passed += sandbox.pass_fds
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            cwd=workdir,
            env=env,
            pass_fds=passed,
            close_fds=True,
            start_new_session=True,
            **identity.popen_credentials(),
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

    tool = shutil.which("unshare") if identity.userns and identity.uid is None and not identity.sandbox else None
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


def kill_adopted_children(spare: Collection[int] = ()) -> None:
    """SIGKILL every process whose parent is the harness (orphans adopted as subreaper), but
    those ``spare`` names."""
    for pid in children_of(os.getpid()):
        if pid in spare:
            continue
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
        limit = memory_limit_hit() if name == "SIGKILL" else 0
        if limit:  # the job's cgroup counted an OOM kill: the kernel ended it for the job's limit
            return (f"ran out of the job's {limit >> 20} MiB memory limit (its processes, the harness and "
                    f"their files in /tmp, /dev/shm and HOME count against it) and was killed ({name})")
        return f"was killed by {meaning} ({name})"
    return f"exited with code {status}"
