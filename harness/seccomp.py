"""The system calls a job may not make: a seccomp filter the sandbox installs before the job runs.

Inside its namespaces a job is an unprivileged uid with no capability, but a user namespace of
its own would give it every capability again over what it makes there: its own mounts (a tmpfs
with no size limit, past the 1 GiB cap of its ``/tmp``), namespaces, keyrings, BPF programs.
The filter refuses with ``EPERM``: ``unshare``, ``setns``, the mount calls (old and new API),
the key calls, ``bpf``, and ``clone`` with any ``CLONE_NEW*`` flag. ``clone3`` gets ``ENOSYS``:
its flags sit in memory a filter cannot read, and glibc (``pthread_create``, ``posix_spawn``)
falls back to ``clone`` on ``ENOSYS``, whose flags it can. A call made under another
architecture's numbers (i386 ``int 0x80`` on x86-64, AArch32 on AArch64) kills the process; x32
numbers on x86-64 get ``ENOSYS``. torch, CUDA and CUPTI (ioctl, mmap), Triton and nvcc/ninja
builds (fork, exec, vfork), ``subprocess`` and ``multiprocessing`` make none of these calls.

Standard library only: the sandbox script loads this file by its path before the job exists.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys
from dataclasses import dataclass

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

# CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET. CLONE_NEWTIME (0x80) is only
# valid in clone3 and unshare: in clone's flags that bit is part of the exit signal.
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

# The new mount API and clone3 have one number on every architecture (asm-generic, 424 on).
_SHARED = {"open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
           "mount_setattr": 442}
CLONE3 = 435


@dataclass(frozen=True)
class Architecture:
    audit: int  # AUDIT_ARCH_* as the kernel reports it in seccomp_data.arch
    refused: dict[str, int]  # name: number, answered EPERM
    clone: int
    x32: bool = False  # x86-64: numbers with X32_SYSCALL_BIT reach the same kernel under the same arch


ARCHITECTURES = {
    "x86_64": Architecture(
        AUDIT_ARCH_X86_64,
        {"unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "add_key": 248,
         "request_key": 249, "keyctl": 250, "bpf": 321, **_SHARED},
        clone=56,
        x32=True,
    ),
    "aarch64": Architecture(
        AUDIT_ARCH_AARCH64,
        {"unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "add_key": 217,
         "request_key": 218, "keyctl": 219, "bpf": 280, **_SHARED},
        clone=220,
    ),
}
ARCHITECTURES["arm64"] = ARCHITECTURES["aarch64"]

# Classic BPF, as seccomp runs it (linux/filter.h, linux/seccomp.h).
LD_W_ABS = 0x20
JEQ, JGE, JSET = 0x15, 0x35, 0x45  # BPF_JMP | op | BPF_K
RET = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
# seccomp_data: nr, arch, instruction pointer, args[6]; args[0]'s low word (little-endian)
NR_OFFSET, ARCH_OFFSET, ARG0_OFFSET = 0, 4, 16

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

Instruction = tuple[int, int, int, int]  # code, jump if true, jump if false, k


class FilterError(Exception):
    pass


def program(machine: str | None = None) -> list[Instruction]:
    """The filter for ``machine`` (``os.uname().machine``; default: this one)."""
    machine = machine or os.uname().machine
    arch = ARCHITECTURES.get(machine)
    if arch is None or sys.byteorder != "little":
        raise FilterError(f"no system-call filter for this machine's architecture ({machine})")
    # (code, true label or offset, false label or offset, k); labels are resolved below.
    steps: list[tuple[int, int | str, int | str, int]] = [
        (LD_W_ABS, 0, 0, ARCH_OFFSET),
        (JEQ, 1, 0, arch.audit),
        (RET, 0, 0, RET_KILL_PROCESS),
        (LD_W_ABS, 0, 0, NR_OFFSET),
    ]
    if arch.x32:
        steps.append((JGE, "enosys", 0, X32_SYSCALL_BIT))
    steps += [(JEQ, "eperm", 0, number) for number in sorted(arch.refused.values())]
    steps += [
        (JEQ, "enosys", 0, CLONE3),
        (JEQ, 0, "allow", arch.clone),
        (LD_W_ABS, 0, 0, ARG0_OFFSET),
        (JSET, "eperm", "allow", CLONE_NEW_ANY),
    ]
    labels = {"allow": len(steps), "eperm": len(steps) + 1, "enosys": len(steps) + 2}
    steps += [(RET, 0, 0, RET_ALLOW), (RET, 0, 0, RET_ERRNO | errno.EPERM), (RET, 0, 0, RET_ERRNO | errno.ENOSYS)]

    def offset(index: int, jump: int | str) -> int:
        return labels[jump] - index - 1 if isinstance(jump, str) else jump

    return [(code, offset(i, jt), offset(i, jf), k) for i, (code, jt, jf, k) in enumerate(steps)]


def install(machine: str | None = None) -> None:
    """Install the filter on this thread, for it and everything it starts; for good (a filter
    cannot be removed). Needs no_new_privs set first (the sandbox sets it as it drops privileges)."""
    instructions = program(machine)
    packed = b"".join(struct.pack("=HBBI", *step) for step in instructions)
    buffer = ctypes.create_string_buffer(packed, len(packed))

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = Program(len(instructions), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                        ctypes.c_ulong(0), ctypes.c_ulong(0))
    if result != 0:
        err = ctypes.get_errno()
        raise FilterError(f"installing the system-call filter: {os.strerror(err)} (errno {err})")
