"""The local runner: ``python -m kernelcup.harness`` in a subprocess on this machine.

The harness gets the spec on stdin and nothing else of ours: a fresh working directory, an
environment with no tokens or database URL, and its own process group, so a cancel or a
timeout kills the harness and every process the submission started.

On a GPU the runner keeps one harness started ahead of the next job (``runners.local.standby``
in config): it imports torch and starts the submission's process, both with their CUDA
contexts, then waits for a spec on stdin. A job takes it and the next one is started when that
job ends, never while one is being timed. Every job still gets its own fresh processes.

Build caches are the runner's (``KERNELCUP_CACHE_DIR``): a harness is given a copy of its own
job's (its leaderboard's, user's and source's, harness/workspace.py) and never sees the folder,
and what the job built is kept once the harness has ended, within ``KERNELCUP_CACHE_MAX_MB``
(a job's caches larger than it are not kept; past it the least recently used go first).

Each harness and everything of its job share one cgroup of the job's memory and task limits
(``KERNELCUP_SANDBOX_MEMORY_MB``, ``_TASKS``), made here and removed with the harness's folder.
Bytecode shared by every harness is built by the runner outside every job and bound read-only
(harness/bytecode.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import structlog

from kernelcup.core.config import Settings
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, RunnerError
from kernelcup.harness import bytecode
from kernelcup.harness.cgroups import WHOLE_JOB_ENV, JobCgroup
from kernelcup.harness.process import (
    BYTECODE_DIR_ENV,
    CACHE_ENV,
    HARNESS_DIR,
    IMPORT_ROOT,
    HarnessLaunch,
    cache_root,
    harness_sandboxed,
    job_limits,
    sandboxed,
)
from kernelcup.harness.spec import JobSpec, Progress, Result, ResultReader, SpecError
from kernelcup.harness.workspace import cache_cap, keep_caches, stage_caches
from kernelcup.runners.cards import CardPool

log = structlog.get_logger(__name__)

PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH")
# CUDA_/NVIDIA_ select the device; KERNELCUP_HARNESS_* and KERNELCUP_CACHE_DIR are the harness's
# own operator settings (child user, isolation switches, build cache), and KERNELCUP_SANDBOX_* the
# limits README documents for every job (memory, tasks, file size) and the uids its jobs take
# (harness/uids.py). No other KERNELCUP_ key passes: the database URL and tokens live there.
PASSED_ENV_PREFIXES = ("CUDA_", "NVIDIA_", "KERNELCUP_HARNESS_", "KERNELCUP_SANDBOX_")
PASSED_ENV_EXTRA = ("KERNELCUP_CACHE_DIR",)
STDERR_KEEP_BYTES = 64 * 1024
STDERR_TAIL_LINES = 20
MAX_LINE_BYTES = 64 * 1024 * 1024  # the result line carries logs and profile reports
EXIT_GRACE_S = 5.0
STANDBY_MAX_AGE_S = 1800.0  # an older standby is replaced: a long-idle machine may have changed


def harness_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Only what the harness needs: never a token, a secret or the database URL."""
    source = os.environ if environ is None else environ
    env = {
        key: value
        for key, value in source.items()
        if key in PASSED_ENV or key in PASSED_ENV_EXTRA or key.startswith(PASSED_ENV_PREFIXES)
    }
    env["PYTHONPATH"] = str(IMPORT_ROOT)  # where `kernelcup` is importable from
    env["PYTHONUNBUFFERED"] = "1"  # progress lines arrive as they happen
    return env


def detect_gpu(registry: Sequence[str], query: Sequence[str] | None = None) -> str | None:
    """The registry name of this machine's GPU ("NVIDIA H100 80GB HBM3" -> "H100"), if any.

    Asks nvidia-smi rather than torch: importing torch in the bot costs seconds and memory.
    """
    return detect_cards(registry, query)[0]


def detect_cards(registry: Sequence[str], query: Sequence[str] | None = None) -> tuple[str | None, int]:
    """This machine's GPU by its registry name, and how many cards of it there are."""
    command = list(query or ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    try:
        answer = subprocess.run(command, capture_output=True, text=True, timeout=15, check=True)
    except (OSError, subprocess.SubprocessError):
        return None, 0
    names = sorted((name for name in registry if name != "cpu"), key=len, reverse=True)
    lines = [line for line in answer.stdout.splitlines() if line.strip()]
    for line in lines:
        for name in names:
            if name.lower() in line.lower():
                return name, sum(1 for other in lines if name.lower() in other.lower())
    if answer.stdout.strip():
        log.warning("GPU not in the registry; serving cpu only", nvidia_smi=answer.stdout.strip())
    return None, 0


@dataclass
class _Harness:
    process: asyncio.subprocess.Process
    workdir: str
    born: float
    # The whole job's memory and task limits: the harness, the leaderboard's code, every process
    # of the submission and the tmpfs pages they write. Empty where this machine gives none.
    cgroup: JobCgroup

    def ran_out_of_memory(self) -> int:
        """The job's memory limit in bytes, where the kernel ended one of its processes for it."""
        return self.cgroup.memory_bytes if self.cgroup.oom_kills() else 0

    async def remove(self) -> None:
        """End whatever of it is left and remove its folder and its cgroup."""
        await asyncio.to_thread(self.cgroup.close)
        await asyncio.to_thread(shutil.rmtree, self.workdir, True)


def standby_count(settings: Settings | None, gpu: str) -> int:
    """Harnesses kept started ahead of jobs: config ``runners.local.standby`` (``auto``: one on a
    GPU, none on the CPU, where the saved start-up is small and CI runs)."""
    value = (settings.runners.get("local", {}) if settings else {}).get("standby", "auto")
    if value == "auto":
        return 0 if gpu == "cpu" else 1
    return max(0, min(1, int(value)))


class LocalRunner:
    name = "local"

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        harness_command: Sequence[str] | None = None,  # tests run a fake harness script
        gpu: str | None = None,  # skips detection
        standby: int | None = None,  # overrides config
        cards: int | None = None,  # this machine's cards of ``gpu`` (with ``gpu``: skips detection)
    ) -> None:
        self._command = list(harness_command or [sys.executable, "-m", "kernelcup.harness"])
        self._sandbox_harness = harness_command is None
        self._cache = cache_root()
        self._cache_cap = cache_cap()  # KERNELCUP_CACHE_MAX_MB: what the kept caches may take
        self._settings = settings
        # This machine's GPU and cards, asked of nvidia-smi when first needed (a one-shot start
        # spawns its harness first): the cards jobs take (runners/cards.py; none on the CPU, where
        # a job's ranks are processes) and the registry's entries of several of them that fit.
        self._gpu: str | None = None
        self._cards: CardPool | None = None
        self._multi: dict[str, int] = {}
        if gpu:
            self._set_machine(gpu, cards if cards is not None else 1)
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._cancelled: set[int] = set()
        self._standby_option = standby
        self._standby: _Harness | None = None
        self._closed = False
        self._one_shot = False
        # Every job's build caches are the runner's: a harness gets a copy of its own job's alone,
        # and the folder is covered should a bind of its sandbox bring it in.
        self._hide = [*_runner_folders(settings), *([str(self._cache)] if self._sandbox_harness else [])]

    async def start(self, one_shot: bool = False) -> None:
        """Start the first standby harness (called when the bot starts). ``one_shot``: the process
        runs one submission and exits (the terminal's ``submit``): its job's harness starts now,
        on the CPU too and before the GPU is even looked up, so that its torch import overlaps the
        command's own work; none is started after the job. Calling it again is a no-op while a
        harness is ready."""
        self._closed = False
        self._one_shot = one_shot
        if one_shot:
            await self._refill(wanted=1)
        else:
            await self._refill()

    async def aclose(self) -> None:
        """Stop the standby harness (called when the bot stops)."""
        self._closed = True
        standby, self._standby = self._standby, None
        if standby is not None:
            await _discard(standby)

    async def _spawn(self, prefix: str, devices: str | None = None) -> _Harness:
        workdir = tempfile.mkdtemp(prefix=prefix)
        (Path(workdir) / "cache").mkdir()  # its job's build caches, staged when the job comes
        command, env = self._command, self._environment(workdir)
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        launch = HarnessLaunch(command)
        cgroup = JobCgroup()
        if self._sandbox_harness:  # a leaderboard's code runs in the harness: it gets a sandbox too
            readonly = await self._bytecode(env)
            if sandboxed():  # one cgroup for the whole job, which the harness's sandbox joins
                cgroup = await asyncio.to_thread(JobCgroup.create, Path(workdir).name, *job_limits())
            try:
                launch = harness_sandboxed(command, Path(workdir), readonly, self._hide, cgroup)
            except BaseException:
                cgroup.close()
                raise
            env.update(launch.env)
            if launch.sandbox is not None:
                # Its temporary folders (the job's HOME, work/ and /tmp among them) live in its
                # sandbox's /tmp: a tmpfs whose size and pages the job's memory limit bounds.
                env["TMPDIR"] = env["HOME"] = "/tmp"
        try:
            process = await asyncio.create_subprocess_exec(
                *launch.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=launch.pass_fds,  # its sandbox's policy, and the lease on its uid
                start_new_session=True,  # its own process group: one kill ends the whole tree
                limit=MAX_LINE_BYTES,
            )
        except OSError as exc:
            cgroup.close()
            shutil.rmtree(workdir, ignore_errors=True)
            raise RunnerError(f"could not start the harness ({self._command[0]}): {exc}") from exc
        finally:
            launch.started()
        log.debug("harness started", pid=process.pid, standby=prefix.startswith("kernelcup-standby"))
        return _Harness(process, workdir, time.monotonic(), cgroup)

    def _environment(self, workdir: str) -> dict[str, str]:
        """The harness's environment: its temporary folders inside ``workdir``, which this runner
        removes whatever happens to the harness (a SIGKILLed harness cannot clean up), and the
        runner's own folders named for the sandbox to cover should a bind bring them in."""
        env = harness_env()
        env.pop(WHOLE_JOB_ENV, None)  # only this runner says which cgroup the harness is in
        env["TMPDIR"] = workdir
        env[CACHE_ENV] = str(Path(workdir) / "cache")
        if self._sandbox_harness:
            env["HOME"] = workdir  # the runner's home is not in the harness's sandbox
        if self._hide:
            env["KERNELCUP_SANDBOX_HIDE"] = os.pathsep.join(self._hide)
        return env

    async def _bytecode(self, env: dict[str, str]) -> list[Path]:
        """The bytecode folder a sandboxed harness reads (harness/bytecode.py: built by this
        runner outside every job, checked, bound read-only), where one is wanted."""
        if not sandboxed():
            return []  # an unsandboxed harness could rewrite it, and so reads none
        folder = await asyncio.to_thread(bytecode.ensure, harness_env())
        if folder is None:
            return []
        env[BYTECODE_DIR_ENV] = str(folder.parent)
        return [folder]

    def _standby_devices(self) -> str | None:
        """The standby waits on the first card (the one a lone single-GPU job takes first)."""
        return self._cards.visible_devices([0]) if self._cards is not None else None

    async def _take(self, job_id: int, devices: str | None = None) -> _Harness:
        """The standby harness if it is alive, fresh and on the job's cards (``devices``), else
        a new one on them. A standby on other cards is ended first: no idle harness holds a card
        beside a timed job (a multi-GPU job holds them all)."""
        standby, self._standby = self._standby, None
        if standby is not None:
            usable = devices is None or devices == self._standby_devices()
            if usable and standby.process.returncode is None and time.monotonic() - standby.born < STANDBY_MAX_AGE_S:
                log.debug("job takes the standby harness", job_id=job_id, pid=standby.process.pid)
                return standby
            await _discard(standby)
        return await self._spawn(f"kernelcup-job{job_id}-", devices)

    async def _refill(self, wanted: int | None = None) -> None:
        if self._closed or self._standby is not None or (self._standby_wanted() if wanted is None else wanted) < 1:
            return
        try:
            self._standby = await self._spawn("kernelcup-standby-", self._standby_devices())
        except RunnerError as exc:
            log.warning("no standby harness", error=str(exc))

    @property
    def standby_pid(self) -> int | None:
        """The process id of the harness waiting for the next job, if one is."""
        return self._standby.process.pid if self._standby is not None else None

    def gpus(self) -> list[str]:
        """This machine's GPU, and the registry's entries of several of its cards that fit here
        (``H200x2`` on a machine with two H200 or more)."""
        return [self._machine(), *sorted(self._multi)]

    @property
    def cards(self) -> CardPool | None:
        self._machine()
        return self._cards

    def _machine(self) -> str:
        if self._gpu is None:
            registry = [n for n, c in (self._settings.gpus.items() if self._settings else []) if c.count == 1]
            detected, found = detect_cards(registry)
            self._set_machine(detected or "cpu", found)
        assert self._gpu is not None
        return self._gpu

    def _set_machine(self, gpu: str, found: int) -> None:
        self._gpu = gpu
        self._cards = CardPool.for_machine(found) if gpu != "cpu" and found > 0 else None
        self._multi = {
            name: config.count
            for name, config in (self._settings.gpus.items() if self._settings else [])
            if config.runner == "local"
            and config.count > 1
            and config.card == gpu
            and self._cards is not None
            and config.count <= self._cards.count
        }

    def _standby_wanted(self) -> int:
        if self._standby_option is not None:
            return self._standby_option
        return standby_count(self._settings, self._machine())

    async def run(
        self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback
    ) -> Result:
        self._machine()
        if self._cards is None or spec.device == "cpu":
            return await self._run(spec, context, on_progress, None)
        whole = spec.task.world_size > 0 or context.gpu in self._multi
        if spec.task.world_size > self._cards.count:
            raise RunnerError(f"this job runs {spec.task.world_size} ranks, one per GPU, and this machine has "
                              f"{self._cards.count} {self._gpu}")
        taken = await self._cards.take(whole_machine=whole)
        try:
            log.debug("job holds cards", job_id=context.job_id, cards=[self._cards.names[c] for c in taken])
            return await self._run(spec, context, on_progress, self._cards.visible_devices(taken))
        finally:
            await self._cards.give_back(taken)

    async def _run(
        self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback, devices: str | None
    ) -> Result:
        stderr: deque[bytes] = deque()
        harness = await self._take(context.job_id, devices)
        process, workdir = harness.process, harness.workdir
        self._processes[context.job_id] = process
        stderr_reader = asyncio.create_task(_keep_tail(process, stderr))
        staged = Path(workdir) / "cache"
        try:
            # Only this job's builds (its leaderboard's, user's and source's) reach its harness.
            with suppress(OSError):  # a cache is an optimisation: a job never fails for it
                await asyncio.to_thread(stage_caches, spec, self._cache, staged)
            async with asyncio.timeout(context.limit_s):
                result = await self._talk(process, spec, on_progress)
                if result is None:
                    await process.wait()
                    await stderr_reader
                else:  # the harness's work is done; it has a moment to exit on its own
                    with suppress(TimeoutError):
                        await asyncio.wait_for(process.wait(), EXIT_GRACE_S)
        except TimeoutError:
            raise RunnerError(
                f"the harness ran past the runner limit of {context.limit_s:g} s and was killed",
                timed_out=True,
            ) from None
        finally:
            _kill_group(process)
            self._processes.pop(context.job_id, None)
            with suppress(TimeoutError):
                await asyncio.wait_for(_reap(process, stderr_reader), EXIT_GRACE_S)
            stderr_reader.cancel()
            out_of_memory = harness.ran_out_of_memory()
            await asyncio.to_thread(harness.cgroup.close)  # nothing of the job outlives this
            # The harness has ended: what its job built is kept, within the cap.
            await asyncio.to_thread(keep_caches, spec, staged, self._cache, self._cache_cap)
            await harness.remove()
            if not self._one_shot:
                await self._refill()  # after the job: at concurrency 1 it never starts beside a timed one
        if result is not None:
            for note in result.system.notes:  # the machine's, not the submission's: for the operator
                log.warning("harness note", note=note, job_id=context.job_id)
            return result
        if context.job_id in self._cancelled:
            self._cancelled.discard(context.job_id)
            raise RunnerError("the job was cancelled")
        if out_of_memory:
            raise RunnerError(
                f"the job ran out of its {out_of_memory >> 20} MiB memory limit: the kernel ended its harness, "
                "which runs the leaderboard's code (reference.py) and counts against the same limit as the "
                "submission's processes and the files they write to /tmp, /dev/shm and HOME"
            )
        raise RunnerError(_no_result(process.returncode, stderr))

    async def cancel(self, job_id: int) -> None:
        process = self._processes.get(job_id)
        if process is not None:
            self._cancelled.add(job_id)
            _kill_group(process)

    async def _talk(
        self, process: asyncio.subprocess.Process, spec: JobSpec, on_progress: ProgressCallback
    ) -> Result | None:
        """Send the spec; pass progress on until the result line, or None at end of output."""
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(spec.to_json().encode())
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it died at once; its exit code and stderr tell why
        reader = ResultReader(spec.result_key)
        while True:
            try:
                raw = await process.stdout.readline()
            except ValueError as exc:  # a line longer than MAX_LINE_BYTES
                raise RunnerError(f"the harness wrote an oversized line: {exc}") from exc
            if not raw:
                return reader.result  # read to the end: a second result line refuses the job
            try:
                event = reader.feed(raw.decode(errors="replace"))
            except SpecError as exc:
                raise RunnerError(f"rejected the harness's result line: {exc}") from exc
            if isinstance(event, Progress):
                await on_progress(event)


def _runner_folders(settings: Settings | None) -> list[str]:
    """The bot's own folders (database, leaderboards, config; the terminal's ``var/``, which holds
    its log, saved files and, where the database is no SQLite file, the hand-off socket through
    which a process of the bot's user could run commands): never for a job to see."""
    if settings is None:
        return []
    folders = [Path(settings.leaderboards_dir).resolve(), Path("var").resolve()]
    url = str(settings.database_url)
    if url.startswith("sqlite:///"):
        folders.append(Path(url.removeprefix("sqlite:///")).resolve().parent)
    harness = HARNESS_DIR
    return [str(f) for f in folders if f != harness and f not in harness.parents]


async def _keep_tail(process: asyncio.subprocess.Process, tail: deque[bytes]) -> None:
    """Drain stderr (a full pipe would block the harness), keeping only its last bytes."""
    assert process.stderr is not None
    kept = 0
    while chunk := await process.stderr.read(8192):
        tail.append(chunk)
        kept += len(chunk)
        while kept - len(tail[0]) >= STDERR_KEEP_BYTES:
            kept -= len(tail.popleft())


async def _reap(process: asyncio.subprocess.Process, stderr_reader: asyncio.Task[None]) -> None:
    """Wait for the exit and both pipes' end, so the process's transport closes now, not when
    the garbage collector finds it after the event loop has gone."""
    assert process.stdout is not None
    await process.wait()
    with suppress(ValueError, OSError):
        await process.stdout.read()
    await stderr_reader


def _no_result(returncode: int | None, stderr: deque[bytes]) -> str:
    lines = b"".join(stderr).decode(errors="replace").strip().splitlines()[-STDERR_TAIL_LINES:]
    tail = ("; last lines of its stderr:\n" + "\n".join(lines)) if lines else ""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"the harness was killed by {name} without a result{tail}"
    return f"the harness exited with code {returncode} without a result{tail}"


async def _discard(harness: _Harness) -> None:
    _kill_group(harness.process)
    with suppress(TimeoutError, ProcessLookupError):
        await asyncio.wait_for(harness.process.communicate(), EXIT_GRACE_S)
    await harness.remove()


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the harness's process group, the submission's processes included."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
