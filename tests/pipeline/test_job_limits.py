"""One memory limit and one task limit for a whole job (issue #37), through the real harness
started by the real LocalRunner.

The runner makes one cgroup per harness (harness/cgroups.py, runners/local.py): the harness, the
leaderboard's code, every process of the submission and the tmpfs pages they write count against
``KERNELCUP_SANDBOX_MEMORY_MB``. A job that reaches it is ended with a verdict that names the
limit; the harness is not the process the kernel picks. Each test has a control: the same job
with room to spare, which shows the probe does what the limit then refuses.

Memory: each job here touches at most about 1.9 GiB (about 300 MiB of it the harness's and the
submission's process with torch), and a limited one at most its 1 GiB.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcup.core.pipeline.runner import RunContext, RunnerError
from kernelcup.harness.cgroups import JobCgroup
from kernelcup.harness.process import sandboxed
from kernelcup.harness.spec import JobSpec, Mode, Progress, Result, Status
from kernelcup.harness.workspace import job_cache_dir, trim_caches
from kernelcup.runners.local import LocalRunner
from tests.harness.conftest import leaderboard_spec

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
BOARD = ROOT / "leaderboards" / "vectoradd"
LIMIT_MB = 1024


def _whole_job_cgroup() -> str:
    """Why this machine gives the runner no cgroup with a memory limit, or ""."""
    if not sandboxed():
        return "no sandbox on this machine: the harness runs unsandboxed and joins no cgroup"
    group = JobCgroup.create("probe", 64 << 20, 64)
    try:
        return "" if group.oom_counter is not None else "this machine lets the runner make no memory cgroup"
    finally:
        group.close()


NO_CGROUP = _whole_job_cgroup()
needs_cgroup = pytest.mark.skipif(bool(NO_CGROUP), reason=NO_CGROUP)


def _job(submission_extra: str = "", reference_extra: str = "") -> JobSpec:
    """vectoradd's correct PyTorch solution with ``submission_extra`` run at its import (and the
    leaderboard's reference with ``reference_extra``), one test case."""
    source = (BOARD / "solutions" / "pytorch.py").read_text() + submission_extra
    job = leaderboard_spec(BOARD, source, Mode.TEST, device="cpu", job_id="1", timeout_s=60)
    job.task.tests = job.task.tests[:1]
    job.files["reference.py"] += reference_extra
    return job


async def _run(job: JobSpec, runner: LocalRunner | None = None) -> Result:
    async def on_progress(event: Progress) -> None:
        return None

    return await (runner or LocalRunner(gpu="cpu")).run(job, RunContext(1, "cpu", 120), on_progress)


def _said(result: Result, tag: str) -> list[str]:
    return [line.removeprefix(f"{tag} ") for line in result.stdout.splitlines() if line.startswith(f"{tag} ")]


@pytest.fixture
def limited(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[bool]:
    """``True``: the job's memory limit is 1 GiB; ``False`` (the control): the default (¾ of RAM)."""
    on = bool(getattr(request, "param", True))
    if on:
        monkeypatch.setenv("KERNELCUP_SANDBOX_MEMORY_MB", str(LIMIT_MB))
    else:
        monkeypatch.delenv("KERNELCUP_SANDBOX_MEMORY_MB", raising=False)
    yield on


# Starts ``count`` plain Python processes that each touch @MB@ MiB and hold it until every one
# has said whether it got there (a line on its stdout, or its end); then all are let go.
_SPREAD = '''

import subprocess as _sp
import sys as _sys

_HOLD = """
import sys
block = bytearray(@MB@ << 20)
block[:: 1 << 12] = b"x" * len(block[:: 1 << 12])
print("held", flush=True)
sys.stdin.read()
"""


def _spread(count: int) -> list[str]:
    holders = [_sp.Popen([_sys.executable, "-c", _HOLD], stdin=_sp.PIPE, stdout=_sp.PIPE, text=True)
               for _ in range(count)]
    said = [holder.stdout.readline().strip() or "refused" for holder in holders]
    for holder in holders:
        holder.stdin.close()
    return [f"{word}({holder.wait()})" for word, holder in zip(said, holders)]


print("SPREAD", *_spread(4), flush=True)
'''


@needs_cgroup
@pytest.mark.parametrize("limited", [True, False], ids=["1 GiB for the job", "control: default"], indirect=True)
async def test_a_jobs_processes_share_one_memory_limit(limited: bool) -> None:
    """Four processes of 400 MiB each: each fits a per-process limit of 1 GiB, together (with the
    harness and the submission's process) they do not fit one of 1 GiB for the whole job. Under it
    the kernel ends the largest of the job's processes until the rest fit: holders (the job goes
    on, and says which it lost) or the submission's own process (the job ends with the verdict).
    The control, with room, holds all four."""
    result = await _run(_job(_SPREAD.replace("@MB@", "400")))
    said = _said(result, "SPREAD")
    if not limited:
        assert result.status is Status.PASSED, result.verdict
        assert said and said[0].split().count("held(0)") == 4, said
        return
    assert f"memory {LIMIT_MB} MiB for the whole job (the runner's cgroup)" in result.system.isolation or (
        result.status is Status.CRASHED
    ), result.system.isolation
    if result.status is Status.CRASHED:
        assert f"ran out of the job's {LIMIT_MB} MiB memory limit" in result.verdict, result.verdict
        return
    assert result.status is Status.PASSED, result.verdict
    assert said and "refused(-9)" in said[0] and said[0].split().count("held(0)") * 400 < LIMIT_MB, said


_BALLAST = '''

_BALLAST = bytearray(@MB@ << 20)
_BALLAST[:: 1 << 12] = b"x" * len(_BALLAST[:: 1 << 12])
'''


@needs_cgroup
@pytest.mark.parametrize("ballast_mb", [1536, 256], ids=["1.5 GiB", "control: 256 MiB"])
async def test_a_reference_that_outgrows_the_job_limit_gets_a_verdict_in_words(
    limited: bool, ballast_mb: int
) -> None:
    """A leaderboard's reference.py runs in the harness (and in the submission's process, which
    generates the same inputs): one that touches 1.5 GiB at import under a 1 GiB job limit ends
    the job with a sentence naming the limit, whichever of its processes the kernel ended. The
    control touches 256 MiB: the limit leaves room for a reference of that size."""
    job = _job(reference_extra=_BALLAST.replace("@MB@", str(ballast_mb)))
    if ballast_mb < LIMIT_MB // 2:
        result = await _run(job)
        assert result.status is Status.PASSED, result.verdict
        return
    try:
        result = await _run(job)
        said = f"{result.status}: {result.verdict}"
    except RunnerError as exc:
        said = str(exc)
    assert "ran out of" in said and f"{LIMIT_MB} MiB memory limit" in said, said


# Starts threads that all wait together, until @COUNT@ run or no more can be started.
_THREADS = '''

import threading as _threading


def _threads(count: int) -> int:
    release, started = _threading.Event(), []
    try:
        for _ in range(count):
            thread = _threading.Thread(target=release.wait)
            thread.start()
            started.append(thread)
    except RuntimeError:  # "can't start new thread": the job's task limit
        pass
    finally:
        release.set()
        for thread in started:
            thread.join()
    return len(started)


if _threads(@COUNT@) >= @COUNT@:
    raise RuntimeError("TASKS: @COUNT@ threads started")
'''


@needs_cgroup
@pytest.mark.parametrize("tasks", [100, None], ids=["100 tasks for the job", "control: default"])
async def test_the_harness_and_the_leaderboards_code_count_against_the_task_limit(
    monkeypatch: pytest.MonkeyPatch, tasks: int | None
) -> None:
    """A reference.py that starts 200 threads at import, under ``KERNELCUP_SANDBOX_TASKS=100``:
    in the harness too (no per-process limit there) it cannot, and the job passes; the control,
    with the default of 1024, starts all 200 and its reference says so by failing."""
    if tasks is not None:
        monkeypatch.setenv("KERNELCUP_SANDBOX_TASKS", str(tasks))
    result = await _run(_job(reference_extra=_THREADS.replace("@COUNT@", "200")))
    if tasks is None:
        assert result.status is Status.ERROR and "TASKS: 200 threads started" in result.verdict, result.verdict
        return
    assert result.status is Status.PASSED, result.verdict
    assert f"{tasks} tasks for the whole job (the runner's cgroup)" in result.system.isolation, result.system.isolation


# Writes @MB@ MiB to a file in @WHERE@ (a folder of the job's: /dev/shm, /tmp, HOME).
_FILL = '''

import os as _os


def _fill(folder: str, mib: int) -> str:
    chunk = b"x" * (1 << 20)
    try:
        with open(_os.path.join(folder, "ballast"), "wb") as handle:
            for _ in range(mib):
                handle.write(chunk)
        return f"wrote {mib} MiB"
    except OSError as exc:
        return f"refused: {exc}"


print("FILL", _fill(@WHERE@, @MB@), flush=True)
'''
PLACES = {"/dev/shm": '"/dev/shm"', "/tmp": '"/tmp"', "HOME": '_os.environ["HOME"]'}


@needs_cgroup
@pytest.mark.parametrize("limited", [True, False], ids=["1 GiB for the job", "control: default"], indirect=True)
@pytest.mark.parametrize("place", list(PLACES))
async def test_files_a_job_writes_in_memory_count_against_its_limit(limited: bool, place: str) -> None:
    """900 MiB written to /dev/shm, /tmp or HOME (all tmpfs, under their own size caps of 1 GiB and
    more): under a 1 GiB limit for the whole job the submission is ended with the verdict, promptly
    (the runner's limit is 120 s); the control writes all of it."""
    started = time.monotonic()
    result = await _run(_job(_FILL.replace("@WHERE@", PLACES[place]).replace("@MB@", "900")))
    if not limited:
        assert result.status is Status.PASSED, result.verdict
        assert _said(result, "FILL") == ["wrote 900 MiB"], result.stdout
        return
    assert result.status is Status.CRASHED, (result.status, result.verdict, result.stdout)
    assert f"ran out of the job's {LIMIT_MB} MiB memory limit" in result.verdict, result.verdict
    assert time.monotonic() - started < 60, "the job was not ended promptly"


def _cache_bytes(store: Path) -> int:
    return sum(path.stat().st_size for path in store.rglob("*") if path.is_file() and not path.is_symlink())


_CACHE_FILL = '''

import os as _os

_folder = _os.path.join(_os.environ["TORCH_EXTENSIONS_DIR"], "ballast")
_os.makedirs(_folder, exist_ok=True)
for _index in range(3):
    with open(_os.path.join(_folder, f"part{_index}.so"), "wb") as _handle:
        _handle.write(b"x" * (100 << 20))
print("CACHE wrote 300 MiB", flush=True)
'''


@pytest.mark.parametrize("cap_mb", [100, 1024], ids=["cap 100 MiB", "control: cap 1 GiB"])
async def test_a_jobs_kept_build_caches_stay_under_the_cap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cap_mb: int
) -> None:
    """A job writes 300 MiB into its build-cache folder. Under ``KERNELCUP_CACHE_MAX_MB=100`` the
    runner keeps none of it; the control, with a 1 GiB cap, keeps all 300 MiB for the next job."""
    store = tmp_path / "store"
    monkeypatch.setenv("KERNELCUP_CACHE_DIR", str(store))
    monkeypatch.setenv("KERNELCUP_CACHE_MAX_MB", str(cap_mb))
    job = _job(_CACHE_FILL)
    result = await _run(job)
    assert result.status is Status.PASSED, result.verdict
    assert _said(result, "CACHE") == ["wrote 300 MiB"], result.stdout
    kept = _cache_bytes(store)
    if cap_mb >= 300:
        assert kept >= 300 << 20, kept
        assert (job_cache_dir(job, "torch_extensions", store) / "ballast" / "part2.so").is_file()
        return
    assert kept <= cap_mb << 20, f"{kept >> 20} MiB kept under a cap of {cap_mb} MiB"


def test_past_the_cap_the_least_recently_used_caches_go_first(tmp_path: Path) -> None:
    """Three scopes of 40 MiB used in turn, under a cap of 100 MiB: the oldest goes. The control,
    under a cap of 120 MiB, keeps all three."""
    for cap_mb, kept in ((100, ["b", "c"]), (120, ["a", "b", "c"])):
        store = tmp_path / str(cap_mb)
        for age, name in enumerate(["a", "b", "c"]):
            scope = store / "triton" / name
            scope.mkdir(parents=True)
            (scope / "build.bin").write_bytes(b"x" * (40 << 20))
            os.utime(scope, (1_000_000 + age, 1_000_000 + age))
        trim_caches(store, cap_mb << 20)
        assert sorted(p.name for p in (store / "triton").iterdir()) == kept, cap_mb


def _job_cgroups() -> list[Path]:
    """The cgroups this process's runners made (named ``kernelcup-<runner's pid>-...``)."""
    pattern = f"kernelcup-{os.getpid()}-*"
    root = Path("/sys/fs/cgroup")
    return [path for depth in range(5) for path in root.glob("/".join(["*"] * depth + [pattern]))]


@needs_cgroup
async def test_the_whole_job_cgroup_is_removed_when_its_harness_ends() -> None:
    """Each harness's cgroup is there while it lives (the standby's, before its job) and gone once
    it has ended: after a job, and when the runner stops with a standby waiting."""
    runner = LocalRunner(gpu="cpu", standby=1)
    await runner.start()
    try:
        assert _job_cgroups(), "the standby harness has no cgroup of its own"
        result = await _run(_job(), runner)
        assert result.status is Status.PASSED, result.verdict
        assert runner.standby_pid is not None
        assert len({path.name for path in _job_cgroups()}) == 1, _job_cgroups()  # the next standby's alone
    finally:
        await runner.aclose()
    assert _job_cgroups() == []
