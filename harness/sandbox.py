"""The sandbox a submission runs in: its own namespaces, its own view of the machine, limits.

Run as a script (``python -I -S harness/sandbox.py --policy-fd=N COMMAND...``) by
``harness/process.py``; standard library only, so it starts in a few milliseconds and imports
nothing the submission could have touched. The policy (a JSON object) is read from file
descriptor ``N``, never from the command line: the init's command line is the job's
``/proc/1/cmdline``, and the launcher's is readable by every user of the machine, while the
policy names the bot's own folders (the ones to hide). Three processes:

* the *launcher* (this script's first process) stays in the caller's namespaces, joins the
  job's cgroup, and writes the user-id maps of the next one (only a process outside a new user
  namespace may map uids other than its own);
* the *keeper* unshares user, mount, PID, network, IPC and UTS namespaces and forks;
* the *init* (PID 1 of the new PID namespace) builds a root file system from bind mounts —
  read-only system and Python folders, the job's own folders writable, ``/dev`` with only the
  GPU's and a few harmless nodes, a fresh ``/proc``, private ``/tmp`` and ``/dev/shm`` —, pivots
  into it, brings up loopback in its empty network namespace, sets the limits, becomes the
  unprivileged inside uid, drops every capability, installs the system-call filter
  (``harness/seccomp.py``: no namespace, mount, key or BPF call), shows itself as
  ``kernelcup-sandbox`` in ``/proc/1/cmdline``, and executes the command.

When the init exits, the kernel kills every process of the PID namespace, however it forked or
``setsid``-ed; each process above dies with its parent (``PR_SET_PDEATHSIG``), so killing the
launcher ends the whole job. Exit statuses are relayed: the launcher exits as the command did,
or dies by the same signal. A failure to set up exits with ``SETUP_FAILED`` and one line on
stderr that starts with ``SETUP_PREFIX``.
"""

from __future__ import annotations

import ctypes
import errno
import importlib.util
import json
import os
import resource
import signal
import socket
import struct
import sys
from types import ModuleType
from typing import Any, NoReturn

SETUP_FAILED = 125
SETUP_PREFIX = "kernelcup sandbox: "

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_RELATIME = 1 << 21
ST_RELATIME = 4096
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYS_PIVOT_ROOT = 155  # x86-64; aarch64 is 41
SYS_CAPSET = 126  # x86-64; aarch64 is 91
SIOCSIFFLAGS = 0x8914
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40

# Harmless character devices every program may expect.
_BASIC_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)
SHOWN_AS = "kernelcup-sandbox"  # the init's command line, as the job sees it in /proc/1/cmdline
POLICY_FD = "--policy-fd="


def _sibling(name: str) -> ModuleType:
    """A module of this folder, loaded by its path: run with ``-I``, the script's folder is not
    on ``sys.path`` (so nothing the job could have written is imported)."""
    spec = importlib.util.spec_from_file_location(f"kernelcup_sandbox_{name}", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # where its dataclasses look themselves up
    spec.loader.exec_module(module)
    return module


def show_arguments(arguments: list[str]) -> None:
    """Make ``/proc/self/cmdline`` read ``arguments`` instead of the command line this process
    was started with, by rewriting the memory it is read from (the kernel's ``arg_start`` to
    ``arg_end``, ``proc(5)``), as setproctitle does. The interpreter keeps its own copy of its
    arguments, so nothing else changes. What does not fit is cut; what is left over reads as
    empty arguments."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # fields 48 and 49; the list starts at field 3
    except (OSError, IndexError, ValueError):
        return
    if start <= 0 or end <= start:
        return
    text = b"\0".join(argument.encode() for argument in arguments)[: end - start - 1]
    ctypes.memset(start, 0, end - start)
    ctypes.memmove(start, text, len(text))


class SetupError(Exception):
    pass


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(err)} (errno {err})")


def _syscall_numbers() -> tuple[int, int]:
    machine = os.uname().machine
    return (41, 91) if machine in ("aarch64", "arm64") else (SYS_PIVOT_ROOT, SYS_CAPSET)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {source or fstype} on {target}",
    )


def _prctl(option: int, arg: int) -> int:
    return int(_libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0))


def _die_with_parent() -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _inside(root: str, path: str) -> str:
    return os.path.join(root, path.lstrip("/"))


def _make_mountpoint(root: str, path: str, is_dir: bool) -> str:
    target = _inside(root, path)
    os.makedirs(target if is_dir else os.path.dirname(target), mode=0o755, exist_ok=True)
    if not is_dir and not os.path.exists(target):
        with open(target, "w"):
            pass
    return target


def _locked_flags(path: str) -> int:
    """The flags of the mount ``path`` is on that a user namespace may not clear on remount."""
    flag = os.statvfs(path).f_flag
    kept = flag & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME | MS_NODIRATIME)
    return kept | (MS_RELATIME if flag & ST_RELATIME else 0)


def _bind(
    root: str, path: str, writable: bool, recursive: bool = True, device: bool = False, at: str = ""
) -> None:
    """Bind ``path`` at the same place under ``root`` (or at ``at``); a symlink is recreated as a
    symlink."""
    if at and os.path.islink(path):
        raise SetupError(f"{path} is a link: a moved folder must be a folder")
    if os.path.islink(path):
        target = _inside(root, path)
        os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        return
    if not os.path.exists(path):
        return
    target = _make_mountpoint(root, at or path, os.path.isdir(path))
    _mount(path, target, None, MS_BIND | (MS_REC if recursive else 0))
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | _locked_flags(path) | (0 if writable else MS_RDONLY)
    if not device:
        flags |= MS_NODEV
    _mount(None, target, None, flags)


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _hide(root: str, path: str, bound: list[str], needed: list[str]) -> str | None:
    """Cover ``path``, one of the runner's own folders (its database's, say), where a read-only
    bind brought it in: where it is, or lies inside, one of ``bound``. Elsewhere no bind
    brought it in and the job sees only the folders bound on the way to it (the private ``/tmp``,
    the home folder that holds Python's installation): covering it would cover those. Each of
    ``needed`` inside it is bound again over the cover. A folder every job reads cannot be
    hidden and ends the setup, naming it. Returns a covered folder, to make read-only once every
    folder is bound (a job's own writable folder may lie inside it)."""
    if not any(_within(path, folder) for folder in bound):
        return None
    if path in needed:
        _fail(f"{path} holds the bot's own files (its database, leaderboards or var/) and is also a folder "
              "every job reads (Python, its packages or a tool on PATH); keep the bot's files elsewhere")
    target = _inside(root, path)
    if os.path.isdir(target) and not os.path.islink(target):
        _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=64k,mode=0755")
        for folder in needed:
            if _within(folder, path):
                _bind(root, folder, writable=False)
        return target
    if os.path.exists(target):
        _mount("/dev/null", target, None, MS_BIND)
    return None


def _make_dev(root: str, devices: list[str], shm_bytes: int) -> None:
    dev = _inside(root, "/dev")
    os.makedirs(dev, mode=0o755, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=0755")
    for name in _BASIC_DEVICES:
        _bind(root, f"/dev/{name}", writable=True, device=True)
    for node in devices:
        _bind(root, node, writable=True, device=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, os.path.join(dev, name))
    shm = os.path.join(dev, "shm")
    os.makedirs(shm, exist_ok=True)
    _mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, f"size={shm_bytes},mode=1777")


def _pivot(root: str) -> None:
    pivot_root, _ = _syscall_numbers()
    os.chdir(root)
    _check(_libc.syscall(pivot_root, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detaching the old root")
    os.chdir("/")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        import fcntl

        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP | IFF_LOOPBACK | IFF_RUNNING))


def _set_limits(limits: dict[str, int]) -> None:
    for name, value in limits.items():
        number = getattr(resource, f"RLIMIT_{name}")
        resource.setrlimit(number, (value, value))


def _drop_privileges(uid: int, gid: int) -> None:
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(64):  # while CAP_SETPCAP is still ours
        if _prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() == errno.EINVAL:
            break
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    _, capset = _syscall_numbers()
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: all empty (two words each)
    _check(_libc.syscall(capset, header, data), "dropping capabilities")
    _check(_prctl(PR_SET_NO_NEW_PRIVS, 1), "setting no_new_privs")


def _become_init(policy: dict[str, Any], command: list[str], ended_by: int) -> None:
    """PID 1 of the job: build its root, lock it down, run ``command`` and end as it ended
    (a signal that killed it is written to ``ended_by``). Never returns."""
    _die_with_parent()
    seccomp = _sibling("seccomp") if policy.get("syscall_filter", True) else None  # read while the host's / is ours
    root = str(policy["root"])
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    tmp_size = int(policy.get("tmp_bytes", 256 << 20))
    for tmp in ("/tmp", "/var/tmp"):
        os.makedirs(_inside(root, tmp), mode=0o1777, exist_ok=True)
        _mount("tmpfs", _inside(root, tmp), "tmpfs", MS_NOSUID | MS_NODEV, f"size={tmp_size},mode=1777")
    readonly = [str(path) for path in policy.get("readonly", [])]  # shallowest first
    bound: list[str] = []
    for path in readonly:
        if not any(_within(path, folder) for folder in bound if not os.path.islink(folder)):
            _bind(root, path, writable=False)
            bound.append(path)
    if policy.get("sys", True):
        # A sysfs of its own (allowed: the network namespace is ours): device information for
        # CUDA and NVML, without the host's cgroup and other mounts below /sys.
        os.makedirs(_inside(root, "/sys"), mode=0o555, exist_ok=True)
        _mount("sysfs", _inside(root, "/sys"), "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # Shallowest first: a folder inside one already covered is gone with it (unless a folder bound
    # again over that cover brought it back), and a cover made first would be buried by the later.
    hidden = sorted((str(path) for path in policy.get("hide", [])), key=lambda path: path.rstrip("/").count("/"))
    covers = [_hide(root, path, bound, readonly) for path in hidden]
    for path in policy.get("writable", []):
        _bind(root, str(path), writable=True)
    for outside, inside in policy.get("moved", []):
        _bind(root, str(outside), writable=True, at=str(inside))
    for cover in covers:
        if cover is not None:
            _mount(None, cover, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _make_dev(root, [str(d) for d in policy.get("devices", [])], int(policy.get("shm_bytes", 64 << 20)))
    os.makedirs(_inside(root, "/proc"), mode=0o555, exist_ok=True)
    _mount("proc", _inside(root, "/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _pivot(root)
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    socket.sethostname("kernelcup")
    _loopback_up()
    _set_limits({str(k): int(v) for k, v in dict(policy.get("limits", {})).items()})
    _drop_privileges(int(policy["inside_uid"]), int(policy["inside_gid"]))
    _die_with_parent()  # a credential change clears it
    os.chdir(str(policy.get("cwd", "/")))
    if seccomp is not None:
        # Last, as it refuses mount and pivot_root; inherited by the command and all it starts.
        try:
            seccomp.install()
        except seccomp.FilterError as exc:
            raise SetupError(str(exc)) from None
    show_arguments([SHOWN_AS])
    # The command must not be PID 1: the kernel drops signals a PID 1 sends itself without a
    # handler (``kill -SEGV $$``, ``abort()``), so it would not die the way it should.
    command_pid = os.fork()
    if command_pid == 0:
        _die_with_parent()
        os.execvp(command[0], command)
    _, status = _wait(command_pid)
    if os.WIFSIGNALED(status):
        os.write(ended_by, str(os.WTERMSIG(status)).encode())
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def _wait(pid: int) -> tuple[int, int]:
    while True:
        try:
            return os.waitpid(pid, 0)
        except InterruptedError:
            continue


def _relay(pid: int, ended_by: int | None = None) -> None:
    """Wait for ``pid`` and end this process the way it ended (by the signal ``ended_by`` names,
    when it reports one). Never returns."""
    _, status = _wait(pid)
    number = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
    if ended_by is not None and not number:
        reported = os.read(ended_by, 16)
        number = int(reported) if reported.isdigit() else 0
    if number:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if number not in (signal.SIGKILL, signal.SIGSTOP):  # these have no handler to reset (EINVAL)
            signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
        os._exit(128 + number)
    os._exit(os.waitstatus_to_exitcode(status))


def _fail(message: str) -> NoReturn:
    os.write(2, (SETUP_PREFIX + message + "\n").encode(errors="replace"))
    os._exit(SETUP_FAILED)


def _id_map(inside: int, outside: int) -> str:
    """The job's id is ``inside`` (mapped to ``outside``). A root launcher also maps root to
    itself, so the init can still reach the folders it binds while it builds the root; the
    init then becomes ``inside`` and keeps no capability and no way back."""
    if os.geteuid() == 0 and outside != 0:
        return f"0 0 1\n{inside} {outside} 1\n"
    return f"{inside} {outside} 1\n"


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _keeper(policy: dict[str, Any], command: list[str], ready: int, mapped: int, launcher: int) -> None:
    """Unshare, wait for the launcher to map our ids, fork the init, relay its end."""
    _die_with_parent()
    if os.getppid() != launcher:
        os._exit(SETUP_FAILED)
    flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS
    try:
        if os.geteuid() == 0:
            os.setgroups([])  # no supplementary group (root's) travels into the namespace
        _check(_libc.unshare(flags), "unshare (user namespaces may be disabled on this machine)")
    except (SetupError, OSError) as exc:
        _fail(str(exc))
    _die_with_parent()  # the new user namespace came with new credentials
    os.write(ready, b"u")
    granted = os.read(mapped, 1)
    os.close(ready)
    os.close(mapped)
    if granted != b"m":
        _fail("the launcher could not map the job's user id")
    ended_r, ended_w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(ended_r)
        try:
            _become_init(policy, command, ended_w)
        except (SetupError, OSError) as exc:
            _fail(str(exc))
        except BaseException as exc:  # never let the init fall back into the keeper's code
            _fail(f"{type(exc).__name__}: {exc}")
    os.close(ended_w)
    _relay(init, ended_r)


def _join_cgroups(paths: list[str]) -> None:
    for path in paths:
        _write(os.path.join(path, "cgroup.procs"), str(os.getpid()))


def _raise_oom_score(score: int | None) -> None:
    """Make this process (and so every process of the job, which inherit it) the OOM killer's first
    pick where the job's memory limit is reached: the harness, at its default, reports the job's
    end instead of being ended. Raising one's own score needs no privilege."""
    if score is None:
        return
    try:
        _write("/proc/self/oom_score_adj", str(int(score)))
    except OSError as exc:
        _fail(f"raising the job's OOM score: {exc}")


def _read_policy(argument: str) -> dict[str, Any]:
    """The policy from the descriptor ``--policy-fd=N`` names (read from its start: the harness
    hands the same one to every process of a job), closed once read. The descriptors it names in
    ``keep_fds`` (the lease on the job's uid) stay open in this process and are never passed on."""
    if not argument.startswith(POLICY_FD):
        _fail(f"no policy: the first argument must be {POLICY_FD}N")
    fd = int(argument[len(POLICY_FD):])
    chunks: list[bytes] = []
    while chunk := os.pread(fd, 1 << 16, sum(map(len, chunks))):
        chunks.append(chunk)
    os.close(fd)
    policy: dict[str, Any] = json.loads(b"".join(chunks))
    for kept in policy.get("keep_fds", []):
        os.set_inheritable(int(kept), False)
    return policy


def main(argv: list[str]) -> None:
    try:
        policy = _read_policy(argv[0] if argv else "")
    except (OSError, ValueError) as exc:
        _fail(f"reading the policy: {exc}")
    command = argv[1:]
    if not command:
        _fail("no command")
    parent = policy.get("parent_pid")
    if parent:
        _die_with_parent()
        if os.getppid() != int(parent):  # the harness died before the line above
            os._exit(SETUP_FAILED)
    try:
        _join_cgroups([str(p) for p in policy.get("cgroups", [])])
    except OSError as exc:
        _fail(f"joining the job's cgroup: {exc}")
    _raise_oom_score(policy.get("oom_score_adj"))
    ready_r, ready_w = os.pipe()
    mapped_r, mapped_w = os.pipe()
    launcher = os.getpid()
    keeper = os.fork()
    if keeper == 0:
        os.close(ready_r)
        os.close(mapped_w)
        _keeper(policy, command, ready_w, mapped_r, launcher)
    os.close(ready_w)
    os.close(mapped_r)
    if os.read(ready_r, 1) == b"u":
        try:
            _write(f"/proc/{keeper}/setgroups", "deny")
            _write(f"/proc/{keeper}/uid_map", _id_map(policy["inside_uid"], policy["outside_uid"]))
            _write(f"/proc/{keeper}/gid_map", _id_map(policy["inside_gid"], policy["outside_gid"]))
            os.write(mapped_w, b"m")
        except OSError as exc:
            os.write(2, f"{SETUP_PREFIX}mapping the job's user id: {exc}\n".encode())
            os.kill(keeper, signal.SIGKILL)
    os.close(mapped_w)
    _relay(keeper)


if __name__ == "__main__":
    main(sys.argv[1:])
