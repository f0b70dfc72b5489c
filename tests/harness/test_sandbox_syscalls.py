"""What a job may not do even with namespaces of its own, what it sees of the machine's command
lines, and which uid it runs as (harness/seccomp.py, harness/sandbox.py, harness/uids.py).

One hostile probe (fixtures/submissions/syscall_probe.py.txt) runs twice at once: in the sandbox
as it is, and, as the control that shows the probe would notice, with the system-call filter
switched off (``KERNELCUP_HARNESS_SECCOMP=0``, read by the harness only). Both jobs wait until
the test has looked at them from outside: their uids, and whether one job's uid (or ``nobody``)
can read the other's files.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import pwd
import secrets
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import (
    LEADERBOARDS,
    REPO,
    leaderboard_spec,
    processes_named,
    read_run,
    run_harness,
    start_harness,
    submission,
)

from kernelcup.harness import seccomp, uids
from kernelcup.harness.process import SECCOMP_ENV, harness_sandboxed
from kernelcup.harness.spec import Mode, Result, Status

ADDMUL = LEADERBOARDS / "addmul"
NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own is for a root harness's jobs")


# --- the filter, instruction by instruction ----------------------------------------------------


def _run_filter(program: list[seccomp.Instruction], nr: int, arch: int, arg0: int = 0) -> int:
    """What seccomp answers for one call: classic BPF as the kernel runs it, for what the
    filter uses (32-bit loads from seccomp_data, JEQ/JGE/JSET against a constant, RET)."""
    data = {seccomp.NR_OFFSET: nr, seccomp.ARCH_OFFSET: arch, seccomp.ARG0_OFFSET: arg0 & 0xFFFFFFFF}
    accumulator, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == seccomp.RET:
            return k
        if code == seccomp.LD_W_ABS:
            accumulator = data[k]
            pc += 1
            continue
        tests = {seccomp.JEQ: accumulator == k, seccomp.JGE: accumulator >= k, seccomp.JSET: bool(accumulator & k)}
        taken = tests[code]
        pc += 1 + (jt if taken else jf)


EPERM, ENOSYS = seccomp.RET_ERRNO | errno.EPERM, seccomp.RET_ERRNO | errno.ENOSYS
CLONE_NEW = {"NEWNS": 0x00020000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000, "NEWIPC": 0x08000000,
             "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}
# What fork, pthread_create and vfork pass to clone (glibc): none of them is refused.
ORDINARY_CLONES = [0x01200011, 0x003D0F00, 0x00004111]
# read, write, ioctl, mmap: what CUDA, CUPTI and everything else need.
ORDINARY = {"x86_64": [0, 1, 16, 9], "aarch64": [63, 64, 29, 222]}


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_refuses_namespaces_mounts_keys_and_bpf_and_nothing_ordinary(machine: str) -> None:
    program = seccomp.program(machine)
    arch = seccomp.ARCHITECTURES[machine]
    for name, number in arch.refused.items():
        assert _run_filter(program, number, arch.audit) == EPERM, name
    for flag, bit in CLONE_NEW.items():
        assert _run_filter(program, arch.clone, arch.audit, 0x11 | bit) == EPERM, flag
    for flags in ORDINARY_CLONES:
        assert _run_filter(program, arch.clone, arch.audit, flags) == seccomp.RET_ALLOW, hex(flags)
    assert _run_filter(program, seccomp.CLONE3, arch.audit) == ENOSYS  # libc falls back to clone
    for number in ORDINARY[machine]:
        assert _run_filter(program, number, arch.audit) == seccomp.RET_ALLOW, number
    assert set(arch.refused) >= {"unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
                                 "fsopen", "fsmount", "fsconfig", "fspick", "keyctl", "add_key", "request_key", "bpf"}


def test_a_call_under_another_architectures_numbers_kills_and_x32_numbers_are_refused() -> None:
    x86, arm = seccomp.program("x86_64"), seccomp.program("aarch64")
    i386, arm32 = 0x40000003, 0x40000028  # AUDIT_ARCH_I386, AUDIT_ARCH_ARM
    assert _run_filter(x86, 310, i386) == seccomp.RET_KILL_PROCESS  # unshare's number on i386
    assert _run_filter(x86, 0, i386) == seccomp.RET_KILL_PROCESS
    assert _run_filter(arm, 337, arm32) == seccomp.RET_KILL_PROCESS
    assert _run_filter(x86, seccomp.X32_SYSCALL_BIT | 272, seccomp.AUDIT_ARCH_X86_64) == ENOSYS  # x32 unshare
    assert _run_filter(x86, 0, seccomp.AUDIT_ARCH_AARCH64) == seccomp.RET_KILL_PROCESS
    with pytest.raises(seccomp.FilterError, match="riscv64"):
        seccomp.program("riscv64")


# The refused calls as root makes them outside any sandbox, where the kernel allows each or fails
# it for another reason (a missing path, a bad descriptor), never EPERM: then under the filter.
KERNEL_CHECK = """
import ctypes, json, os, sys
from kernelcup.harness import seccomp
libc = ctypes.CDLL(None, use_errno=True)
numbers = seccomp.ARCHITECTURES[os.uname().machine].refused
missing = b"/nonexistent-kernelcup"
calls = {
    "unshare": (0,), "setns": (os.open("/proc/self/ns/mnt", os.O_RDONLY), 0x00020000),
    "mount": (b"none", missing, b"tmpfs", 0, 0), "umount2": (missing, 0), "pivot_root": (missing, missing),
    "open_tree": (-100, missing, 0), "move_mount": (-1, b"", -1, b"", 0), "fsopen": (b"tmpfs", 0),
    "fsconfig": (-1, 0, 0, 0, 0), "fsmount": (-1, 0, 0), "fspick": (-100, missing, 0),
    "mount_setattr": (-1, b"", 0, 0, 0), "keyctl": (0, -2, 0), "add_key": (b"nosuchtype", b"kc", 0, 0, -2),
    "request_key": (b"user", b"kernelcup-no-such-key", 0, 0), "bpf": (0, 0, 0),
}
if sys.argv[1] == "filtered":
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    seccomp.install()
found = {}
for name, arguments in calls.items():
    passed = [ctypes.c_long(a) if isinstance(a, int) else a for a in arguments]
    found[name] = 0 if libc.syscall(ctypes.c_long(numbers[name]), *passed) >= 0 else ctypes.get_errno()
print(json.dumps(found))
"""


def _kernel_answers(mode: str) -> dict[str, int]:
    done = subprocess.run([sys.executable, "-c", KERNEL_CHECK, mode], capture_output=True, text=True, cwd=REPO,
                          timeout=120, check=True)
    answers: dict[str, int] = json.loads(done.stdout)
    return answers


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the kernel refuses most of these itself")
def test_the_kernel_answers_eperm_under_the_filter_where_it_answered_otherwise_without() -> None:
    without = _kernel_answers("unfiltered")
    refused_anyway = sorted(name for name, answer in without.items() if answer == errno.EPERM)
    if refused_anyway:
        pytest.skip(f"this machine refuses {refused_anyway} itself (a container's own filter?)")
    assert _kernel_answers("filtered") == {name: errno.EPERM for name in without}


# --- a hostile job, and the same job with the filter off -------------------------------------


@dataclass
class Job:
    """A probe's harness, running: what it found, its result, and what the test saw of it."""

    name: str
    folder: Path  # the harness's TMPDIR: its job's folders are made in it
    marker: str
    env: dict[str, str]
    found: dict[str, Any] = field(default_factory=dict)
    result: Result | None = None
    pid: int = 0  # the submission's process, seen from outside
    uid: int = -1  # its real uid outside, from /proc/<pid>/status
    reads: dict[str, str] = field(default_factory=dict)  # who tried to read this job's submission: what came of it

    @property
    def submission_file(self) -> Path:
        found = [p for p in self.folder.glob("kernelcup-*/work/submission.py") if self.marker in p.read_text()]
        assert len(found) == 1, found
        return found[0]


@dataclass
class Bot:
    """The bot's own folders, which the runner names for the sandbox to hide."""

    database: Path
    leaderboards: Path

    @property
    def hidden(self) -> list[Path]:
        return [self.database.parent, self.leaderboards]


def _open_to_others(path: Path) -> None:
    """Let any uid pass through ``path`` and its parents: only the job's own uid may keep others out."""
    for folder in [path, *path.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            folder.chmod(mode | stat.S_IXOTH)


def _wait_for(found: Callable[[], Any], what: str, seconds: float = 240.0) -> Any:
    """``found()`` once it is truthy; the budget is for a loaded 2-core box, not a fixed pause."""
    limit = time.monotonic() + seconds
    while not (value := found()):
        assert time.monotonic() < limit, what
        time.sleep(0.05)
    return value


def _real_uid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Uid:"):
            return int(line.split()[1])
    raise AssertionError(f"no Uid line for {pid}")


def _read_as(uid: int, path: Path) -> str:
    """Try to read ``path`` as ``uid`` (a forked process that drops to it): what came of it."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            try:
                outcome = f"read {len(path.read_bytes())} bytes"
            except OSError as exc:
                outcome = f"blocked: {exc.strerror}"
            os.write(write, outcome.encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as stream:
        outcome = stream.read().decode()
    os.waitpid(pid, 0)
    return outcome


def _look_at_both(jobs: list[Job]) -> None:
    """While both jobs wait: their uids outside, and who can read whose submission."""
    for job in jobs:
        job.pid = _wait_for(functools.partial(processes_named, job.marker), f"the {job.name} job never waited")[0]
        job.uid = _real_uid(job.pid)
    if os.geteuid() != 0:
        return
    for job in jobs:
        readers = {"nobody": NOBODY, **{f"the {other.name} job's uid": other.uid for other in jobs}}
        job.reads = {who: _read_as(uid, job.submission_file) for who, uid in readers.items()}


def _run_both(bot: Bot, base: Path) -> list[Job]:
    hide = {"KERNELCUP_SANDBOX_HIDE": os.pathsep.join(map(str, bot.hidden))}
    jobs = [Job("filtered", base / "filtered", f"kcsys{secrets.token_hex(3)}", hide),
            Job("unfiltered", base / "unfiltered", f"kcsys{secrets.token_hex(3)}", {**hide, SECCOMP_ENV: "0"})]
    threads = []
    for job in jobs:
        job.folder.mkdir()
        job.folder.chmod(0o1777)
        _open_to_others(job.folder)
        source = submission("syscall_probe.py").replace("@MARKER@", job.marker).replace("@SHOWN@", str(bot.database))
        spec = leaderboard_spec(ADDMUL, source, Mode.TEST, timeout_s=180)
        process = start_harness({"TMPDIR": str(job.folder), **job.env})

        def finish(job: Job = job, process: subprocess.Popen[str] = process, key: str = spec.result_key,
                   text: str = spec.to_json()) -> None:
            stdout, stderr = process.communicate(text, timeout=400)
            job.result = read_run(stdout, stderr, process.returncode, key).outcome()
            line = next((x for x in job.result.stdout.splitlines() if x.startswith("PROBE ")), None)
            assert line is not None, f"the probe printed nothing: {job.result.verdict}\n{job.result.stderr}"
            job.found = json.loads(line[len("PROBE "):])

        threads.append(threading.Thread(target=finish, daemon=True))
        threads[-1].start()
    try:
        _look_at_both(jobs)
    finally:
        for job in jobs:
            for pid in processes_named(job.marker):
                os.kill(pid, signal.SIGUSR1)
        for thread in threads:
            thread.join(timeout=420)
    return jobs


@pytest.fixture(scope="module")
def jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Job]:
    base = tmp_path_factory.mktemp("syscalls")
    bot = Bot(base / "srv" / "kernelcup.db", base / "srv-leaderboards")
    bot.database.parent.mkdir()
    bot.database.write_text("the bot's database\n")
    bot.leaderboards.mkdir()
    ran = {job.name: job for job in _run_both(bot, base)}
    for job in ran.values():
        assert job.result is not None and job.found, f"the {job.name} job did not finish"
    ran["filtered"].found["bot"] = bot
    return ran


ATTEMPTS = ["unshare(CLONE_NEWUSER)", "clone(CLONE_NEWUSER)", "unshare --user", "tmpfs past the cap"]


def test_a_job_can_make_no_namespace_and_no_mount(jobs: dict[str, Job]) -> None:
    job = jobs["filtered"]
    assert job.result is not None and job.result.status is Status.PASSED, job.result
    assert "; system-call filter;" in job.result.system.isolation, job.result.system.isolation
    for attempt in ATTEMPTS:
        assert job.found[attempt].startswith("blocked"), (attempt, job.found[attempt])
        assert "Operation not permitted" in job.found[attempt], (attempt, job.found[attempt])
    if sys.version_info >= (3, 12):
        assert "Operation not permitted" in job.found["os.unshare(CLONE_NEWUSER)"], job.found
    else:
        assert "needs Python 3.12" in job.found["os.unshare(CLONE_NEWUSER)"], job.found


def test_without_the_filter_the_same_probe_makes_them_and_writes_past_the_cap(jobs: dict[str, Job]) -> None:
    """The control: the probe does notice an open door, so the test above can fail."""
    job = jobs["unfiltered"]
    assert job.result is not None and job.result.status is Status.PASSED, job.result
    assert f"no system-call filter ({SECCOMP_ENV}=0)" in job.result.system.isolation
    for attempt in ATTEMPTS:
        assert job.found[attempt].startswith("REACHED"), (attempt, job.found[attempt])
    assert job.found["tmpfs past the cap"] == "REACHED: 1152 MiB written", job.found["tmpfs past the cap"]
    if sys.version_info >= (3, 12):
        assert job.found["os.unshare(CLONE_NEWUSER)"].startswith("REACHED"), job.found


def test_no_command_line_a_job_can_see_names_the_bots_folders(jobs: dict[str, Job]) -> None:
    """The policy (which names the folders to hide) reaches the sandbox through a descriptor, and
    the job's PID 1 shows a fixed name: no host path of the bot in any ``/proc/*/cmdline``. The
    control: the probe's own process with the database's path in its arguments is seen."""
    bot: Bot = jobs["filtered"].found["bot"]
    for job in jobs.values():
        lines: dict[str, str] = job.found["command lines"]
        shown = str(job.found["shown pid"])
        assert str(bot.database) in lines[shown].split("\0"), lines[shown]
        assert lines["1"].rstrip("\0") == "kernelcup-sandbox", lines["1"]
        for pid, line in lines.items():
            if pid != shown:
                for host in (str(REPO), *map(str, bot.hidden), "sandbox.py", "policy"):
                    assert host not in line, (pid, line)


@ROOT_ONLY
def test_two_jobs_at_once_run_as_two_uids_that_are_theirs_alone(jobs: dict[str, Job]) -> None:
    first, second = jobs["filtered"], jobs["unfiltered"]
    assert first.uid != second.uid, (first.uid, second.uid)
    configured = uids.configured_range()
    for job in (first, second):
        assert job.uid in configured and job.uid != NOBODY, job.uid
        with pytest.raises(KeyError):
            pwd.getpwuid(job.uid)
        mapped = job.found["uid_map"]  # as the job sees it: its uid 1000 is job.uid outside
        assert ["1000", str(job.uid), "1"] in [mapped[i : i + 3] for i in range(0, len(mapped), 3)], mapped
        assert f"uid {job.uid} outside" in (job.result.system.isolation if job.result else "")
        other = second if job is first else first
        assert job.reads["nobody"].startswith("blocked"), job.reads
        assert job.reads[f"the {other.name} job's uid"].startswith("blocked"), job.reads
        assert job.reads[f"the {job.name} job's uid"].startswith("read "), job.reads  # the control


# --- an honest job that starts processes -----------------------------------------------------


def test_a_submission_that_starts_processes_passes_under_the_filter() -> None:
    run = run_harness(leaderboard_spec(ADDMUL, submission("starts_processes.py"), Mode.TEST, timeout_s=180))
    result = run.outcome()
    assert result.status is Status.PASSED, (result.verdict, result.stderr)
    assert "; system-call filter;" in result.system.isolation, result.system.isolation
    line = next((x for x in result.stdout.splitlines() if x.startswith("PROCESSES ")), "")
    assert json.loads(line[len("PROCESSES "):]) == {
        "python": "42", "shell": "42", "fork": [1, 2, 3], "spawn": [1, 2, 3], "forkserver": [1, 2, 3]}, line


def test_a_uid_range_that_is_not_a_range_is_refused_by_name() -> None:
    for text in ("2000000000", "5-1", "0-10", "a-b"):
        with pytest.raises(uids.UidError, match=uids.RANGE_ENV):
            uids.configured_range(text)
    assert uids.configured_range("") == range(2000000000, 2000065536)


def test_a_leased_uid_is_not_leased_again_until_released(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    held = [uids.lease(range(3000000000, 3000000003), str(locks)) for _ in range(3)]
    assert sorted(lease.uid for lease in held) == [3000000000, 3000000001, 3000000002]
    with pytest.raises(uids.UidError, match="no free uid"):
        uids.lease(range(3000000000, 3000000003), str(locks))
    held[0].release()
    assert uids.lease(range(3000000000, 3000000003), str(locks)).uid == held[0].uid
    (tmp_path / "open").mkdir(mode=0o777)
    (tmp_path / "open").chmod(0o777)
    with pytest.raises(uids.UidError, match="no one else may write"):
        uids.lease(range(3000000000, 3000000003), str(tmp_path / "open"))
    for lease in held:
        lease.release()


def test_where_the_default_range_is_not_mapped_the_highest_mapped_uids_are_taken() -> None:
    container = "         0       1000          1\n         1     100000      65536\n"
    assert not uids.mapped(uids.configured_range(""), container)
    assert uids.mapped(range(1, 65537), container)
    assert uids.highest_mapped(65536, container) == range(1, 65537)
    assert uids.highest_mapped(1000, container) == range(64537, 65537)
    assert uids.highest_mapped(10, "0 0 1\n") is None  # root alone: nothing to give a job
    assert uids.mapped(uids.configured_range(""), "0 0 4294967295\n")


@ROOT_ONLY
def test_a_runner_hands_its_harness_the_lease_on_its_uid_which_is_free_once_the_harness_ends(tmp_path: Path) -> None:
    """The local runner starts each harness in a sandbox of its own, as a uid of its own: the
    runner lets go of the lease once the harness has started, and the harness's sandbox holds it
    until the harness ends."""
    folder = tmp_path / "harness"
    launch = harness_sandboxed([sys.executable, "-c", "import os, sys; print(open('/proc/self/uid_map').read()); "
                                "sys.stdin.read()"], folder)
    assert launch.sandbox is not None and launch.sandbox.identity.uid is not None
    uid = launch.sandbox.identity.uid
    process = subprocess.Popen(launch.command, env={**os.environ, **launch.env}, pass_fds=launch.pass_fds, cwd=folder,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    launch.started()
    try:
        with pytest.raises(uids.UidError, match="no free uid"):  # the harness's sandbox holds it
            uids.lease(range(uid, uid + 1))
    finally:
        stdout, stderr = process.communicate("", timeout=120)
    assert process.returncode == 0, stderr
    assert str(uid) in stdout.split(), stdout  # its uid_map: 1000 inside is the leased uid outside
    uids.lease(range(uid, uid + 1)).release()  # free again
