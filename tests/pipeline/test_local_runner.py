"""The local runner against real subprocesses: a fake harness that misbehaves on purpose, and
the real ``python -m kernelcup.harness`` when it is there."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import secrets
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcup.core.pipeline.runner import RunContext, RunnerError, runners_by_gpu
from kernelcup.core.plugins import load_runners
from kernelcup.harness.process import _readonly_folders
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, Progress, Result, Status, TaskConfig
from kernelcup.runners.local import LocalRunner, detect_gpu, harness_env
from tests.harness.conftest import leaderboard_spec

from .support import fake_harness, make_settings

pytestmark = pytest.mark.timeout(30)
ROOT = Path(__file__).resolve().parents[2]


def spec(job_id: int = 1) -> JobSpec:
    return JobSpec(
        job_id=str(job_id),
        mode=Mode.TEST,
        task=TaskConfig(tests=[{"size": 8, "seed": 1}]),
        files={"submission.py": "def custom_kernel(data): return data"},
        submission_name="submission.py",
        timeout_s=5,
        device="cpu",
        result_key="ab" * 32,
    )


async def run(runner: LocalRunner, limit_s: float = 20, job_id: int = 1) -> tuple[Result, list[Progress]]:
    seen: list[Progress] = []

    async def on_progress(event: Progress) -> None:
        seen.append(event)

    result = await runner.run(spec(job_id), RunContext(job_id, "cpu", limit_s), on_progress)
    return result, seen


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A killed child of a still-running parent lingers as a zombie: that is dead too.
    status = Path(f"/proc/{pid}/stat")
    return status.exists() and status.read_text().split(") ")[1][0] != "Z"


async def test_progress_and_the_signed_result_come_back() -> None:
    result, seen = await run(LocalRunner(harness_command=fake_harness("pass"), gpu="cpu"))
    assert [(p.phase, p.done) for p in seen] == [("compiling", 0), ("testing", 1), ("testing", 2)]
    assert result.status is Status.PASSED and result.job_id == "1"


async def test_no_secret_reaches_the_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "DISCORD_TOKEN": "discord-secret",
        "SLACK_BOT_TOKEN": "xoxb-secret",
        "KERNELCUP_DATABASE_URL": "postgresql://u:pw@db/kc",
        "AWS_SECRET_ACCESS_KEY": "aws-secret",
        "MODAL_TOKEN_SECRET": "modal-secret",
    }
    for key, value in secrets.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    result, _ = await run(LocalRunner(harness_command=fake_harness("env"), gpu="cpu"))
    env = json.loads(result.stdout)
    assert not set(secrets) & set(env)
    assert not any(value in json.dumps(env) for value in secrets.values())
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["PYTHONPATH"] == str(ROOT)
    allowed = {"PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "PYTHONPATH"}
    allowed |= {"PYTHONUNBUFFERED", "LC_CTYPE", "KERNELCUP_CACHE_DIR"}  # LC_CTYPE: Python may set it on a C locale
    assert {k for k in env if not k.startswith(("CUDA_", "NVIDIA_"))} <= allowed


def test_the_environment_filter_keeps_only_what_the_harness_needs() -> None:
    env = harness_env({"PATH": "/bin", "GITHUB_TOKEN": "t", "NVIDIA_VISIBLE_DEVICES": "all"})
    assert env == {
        "PATH": "/bin",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
    }


def test_the_harness_operator_settings_pass_but_no_other_kernelcup_key() -> None:
    env = harness_env({
        "KERNELCUP_HARNESS_USER": "none",
        "KERNELCUP_CACHE_DIR": "/var/cache/kc",
        "KERNELCUP_DATABASE_URL": "postgresql+psycopg://kc:pw@db/kc",
        "SLACK_BOT_TOKEN": "xoxb",
    })
    assert env["KERNELCUP_HARNESS_USER"] == "none" and env["KERNELCUP_CACHE_DIR"] == "/var/cache/kc"
    assert "KERNELCUP_DATABASE_URL" not in env and "SLACK_BOT_TOKEN" not in env


async def test_a_result_with_a_bad_mac_is_rejected() -> None:
    with pytest.raises(RunnerError, match="not written by the harness"):
        await run(LocalRunner(harness_command=fake_harness("badmac"), gpu="cpu"))


async def test_a_harness_that_exits_without_a_result_says_why() -> None:
    with pytest.raises(RunnerError) as caught:
        await run(LocalRunner(harness_command=fake_harness("crash"), gpu="cpu"))
    message = str(caught.value)
    assert "exited with code 3 without a result" in message and "RuntimeError: boom" in message
    assert not caught.value.timed_out


async def test_the_runner_limit_kills_a_hung_harness_and_its_children(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    runner = LocalRunner(harness_command=fake_harness("hang", str(pidfile)), gpu="cpu")
    started = asyncio.get_running_loop().time()
    with pytest.raises(RunnerError, match=r"runner limit of 1\.5 s") as caught:
        await run(runner, limit_s=1.5)
    assert caught.value.timed_out
    assert asyncio.get_running_loop().time() - started < 5
    pids = [int(pid) for pid in pidfile.read_text().split()]
    assert len(pids) == 2
    await asyncio.sleep(0.2)
    assert not any(alive(pid) for pid in pids)


async def test_cancel_kills_the_harness_tree(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    runner = LocalRunner(harness_command=fake_harness("hang", str(pidfile)), gpu="cpu")
    running = asyncio.create_task(run(runner, job_id=7))
    while not pidfile.exists():
        await asyncio.sleep(0.02)
    await runner.cancel(7)
    with pytest.raises(RunnerError, match="cancelled"):
        await running
    await asyncio.sleep(0.2)
    assert not any(alive(int(pid)) for pid in pidfile.read_text().split())


async def test_a_harness_that_cannot_start_is_a_runner_error() -> None:
    with pytest.raises(RunnerError, match="could not start the harness"):
        await run(LocalRunner(harness_command=["/nonexistent/python"], gpu="cpu"))


def fake_nvidia_smi(tmp_path: Path, output: str) -> list[str]:
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return [str(script)]


def test_the_gpu_is_named_as_in_the_registry_longest_match_first(tmp_path: Path) -> None:
    registry = ["cpu", "H100", "H10", "A100", "H200"]
    assert detect_gpu(registry, fake_nvidia_smi(tmp_path, "NVIDIA H100 80GB HBM3\\n")) == "H100"
    assert detect_gpu(registry, fake_nvidia_smi(tmp_path, "Tesla T4\\n")) is None
    assert detect_gpu(registry, ["/nonexistent/nvidia-smi"]) is None


async def test_a_standby_harness_takes_the_next_job_and_another_starts_after_it() -> None:
    runner = LocalRunner(harness_command=fake_harness("pid"), gpu="cpu", standby=1)
    await runner.start()
    try:
        first = runner.standby_pid
        assert first is not None
        result, _ = await run(runner, job_id=1)
        assert result.status is Status.PASSED and result.stdout == str(first)
        second = runner.standby_pid  # started once the job had ended
        assert second is not None and second != first
        result, _ = await run(runner, job_id=2)
        assert result.stdout == str(second)
    finally:
        await runner.aclose()
    assert runner.standby_pid is None
    await asyncio.sleep(0.2)
    assert not alive(second)


async def test_a_one_shot_runner_starts_its_standby_at_once_and_none_after_the_job() -> None:
    # The terminal's submit: the harness starts beside the command's own work, and nothing is
    # started for a next job that never comes.
    runner = LocalRunner(harness_command=fake_harness("pid"), gpu="cpu", standby=1)
    await runner.start(one_shot=True)
    try:
        ready = runner.standby_pid
        assert ready is not None
        result, _ = await run(runner, job_id=1)
        assert result.status is Status.PASSED and result.stdout == str(ready)
        assert runner.standby_pid is None
    finally:
        await runner.aclose()


async def test_a_one_shot_start_spawns_the_jobs_harness_even_where_no_standby_is_kept() -> None:
    # The CPU keeps no standby (auto = 0), but the terminal's submit still wants its harness
    # importing torch while the command opens the store.
    runner = LocalRunner(harness_command=fake_harness("pid"), gpu="cpu", standby=0)
    await runner.start(one_shot=True)
    try:
        ready = runner.standby_pid
        assert ready is not None
        await runner.start(one_shot=True)  # the core starts it again: the same harness waits
        assert runner.standby_pid == ready
        result, _ = await run(runner, job_id=1)
        assert result.stdout == str(ready)
    finally:
        await runner.aclose()


async def test_a_dead_standby_is_replaced_by_a_fresh_harness() -> None:
    runner = LocalRunner(harness_command=fake_harness("pid"), gpu="cpu", standby=1)
    await runner.start()
    try:
        dead = runner.standby_pid
        assert dead is not None
        os.kill(dead, 9)
        await asyncio.sleep(0.3)
        result, _ = await run(runner)
        assert result.status is Status.PASSED and result.stdout not in ("", str(dead))
    finally:
        await runner.aclose()


def test_standby_defaults_to_one_on_a_gpu_and_none_on_the_cpu() -> None:
    settings = make_settings(runner="local")
    assert LocalRunner(settings, gpu="cpu").standby_pid is None
    from kernelcup.runners.local import standby_count

    assert (standby_count(settings, "cpu"), standby_count(settings, "H100")) == (0, 1)
    settings.runners["local"]["standby"] = 0
    assert standby_count(settings, "H100") == 0


def test_without_a_gpu_the_local_runner_serves_cpu() -> None:
    if detect_gpu(["H100", "H200", "A100", "L4", "T4", "B200"]) is not None:
        pytest.skip("this machine has a GPU")
    assert LocalRunner().gpus() == ["cpu"]


@pytest.mark.skipif(not (ROOT / "harness" / "__main__.py").exists(), reason="harness/__main__.py not written yet")
async def test_the_real_harness_passes_a_correct_solution_on_the_cpu() -> None:
    from kernelcup.core.leaderboards.tasks import read_task_folder, task_config

    board = ROOT / "leaderboards" / "vectoradd"
    folder = read_task_folder(board, reach=board.parent)
    config = task_config(folder.task)
    config.tests, config.benchmarks = config.tests[:2], []
    job = JobSpec(
        job_id="1",
        mode=Mode.TEST,
        task=config,
        files={**folder.files, "submission.py": (board / "solutions" / "pytorch.py").read_text()},
        submission_name="submission.py",
        timeout_s=60,
        device="cpu",
        gpu=GpuInfo(),
        result_key="cd" * 32,
    )
    seen: list[Progress] = []

    async def on_progress(event: Progress) -> None:
        seen.append(event)

    result = await LocalRunner(gpu="cpu").run(job, RunContext(1, "cpu", 90), on_progress)
    assert (result.job_id, result.status) == ("1", Status.PASSED), result.verdict
    assert ("testing", 2, 2) in [(p.phase, p.done, p.total) for p in seen]


def test_the_registry_builds_runners_from_entry_points_and_maps_gpus() -> None:
    settings = make_settings(runner="local")  # cpu and H100 both name the local runner
    runners = load_runners(settings)
    assert set(runners) == {"local"} and isinstance(runners["local"], LocalRunner)
    by_gpu = runners_by_gpu(settings, runners)
    # The local runner serves the one GPU it found (cpu here), not every GPU it is named for.
    assert by_gpu == {gpu: runners["local"] for gpu in runners["local"].gpus()}


def test_a_runner_named_in_config_but_not_installed_is_skipped() -> None:
    assert load_runners(make_settings(runner="nowhere")) == {}


_CREATOR_PROBE = '''
import glob, os, socket


def _leaks(marker: str, database: str) -> list[str]:
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            if marker in open(path, "rb").read().decode(errors="replace"):
                found.append(path)
        except OSError:
            pass
    if os.path.exists(database):
        found.append(database)
    folder = os.path.dirname(database)
    if os.path.isdir(folder) and os.listdir(folder):  # an empty cover over it holds nothing
        found.append(folder)
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
        found.append("PostgreSQL")
    except OSError:
        pass
    return found


_FOUND = _leaks("@MARKER@", "@DATABASE@")
if _FOUND:
    raise RuntimeError(f"a leaderboard's code reached the bot: {_FOUND}")
'''


@pytest.fixture
def installation(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An operator's installation as a folder of its own, ``bin`` on the PATH and ``lib`` beside
    it (so the sandbox binds the whole folder: ``harness/process.py`` ``_prefix_of``), with the
    bot's database in its ``var/``: a job sees that database unless the runner hides its folder.
    Not under /tmp, which every job gets a fresh one of."""
    folder = Path(tempfile.mkdtemp(prefix="kernelcup-install-", dir="/var/tmp"))
    folder.chmod(0o755)  # an installation every user may run
    try:
        for name in ("bin", "lib", "var"):
            (folder / name).mkdir()
        (folder / "var" / "kernelcup.db").write_text("the bot's database")
        monkeypatch.setenv("PATH", f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}")
        _readonly_folders.cache_clear()  # read once per process: from this PATH on
        yield folder
    finally:
        _readonly_folders.cache_clear()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("how", ["hidden", "not hidden", "no sandbox"])
async def test_a_leaderboards_own_code_reaches_nothing_of_the_bot(
    installation: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A creator's reference.py runs in the harness: the runner gives the harness a sandbox too,
    so it finds neither the bot's environment (tokens), its database, nor the network. The
    database lies in a folder the sandbox binds for the job (the installation's), so only the
    runner's hiding of the database's folder keeps it out: the controls, a runner not told where
    the database is and one with no sandbox, find it."""
    from kernelcup.core.leaderboards.tasks import read_task_folder, task_config

    marker = f"xoxb-{secrets.token_hex(8)}"
    monkeypatch.setenv("SLACK_BOT_TOKEN", marker)
    database = installation / "var" / "kernelcup.db"
    board = ROOT / "leaderboards" / "vectoradd"
    folder = read_task_folder(board, reach=board.parent)
    config = task_config(folder.task)
    config.tests, config.benchmarks = config.tests[:1], []
    probe = _CREATOR_PROBE.replace("@MARKER@", marker).replace("@DATABASE@", str(database))
    files = {**folder.files, "submission.py": (board / "solutions" / "pytorch.py").read_text()}
    files["reference.py"] = files["reference.py"] + probe
    job = JobSpec(job_id="1", mode=Mode.TEST, task=config, files=files, submission_name="submission.py",
                  timeout_s=60, device="cpu", gpu=GpuInfo(), result_key="ab" * 32)

    async def on_progress(event: Progress) -> None:
        return None

    settings = dataclasses.replace(make_settings(runner="local"), database_url=f"sqlite:///{database}")
    if how == "no sandbox":
        monkeypatch.setenv("KERNELCUP_HARNESS_SANDBOX", "off")
    runner = LocalRunner(gpu="cpu", settings=None if how == "not hidden" else settings)
    result = await runner.run(job, RunContext(1, "cpu", 90), on_progress)
    if how != "hidden":
        assert result.status is not Status.PASSED
        assert f"a leaderboard's code reached the bot: ['{database}'" in result.verdict, result.verdict
        return
    assert result.status is Status.PASSED, result.verdict
    assert result.system.isolation.startswith("sandbox (namespaces) in the harness's sandbox, uid"), (
        result.system.isolation
    )


_LIMITS_PROBE = '''
import os


def _allocate(nbytes: int) -> str:
    pid = os.fork()
    if pid == 0:
        try:
            block = bytearray(nbytes)
            block[:: 1 << 12] = b"x" * len(block[:: 1 << 12])
            os._exit(0)
        except MemoryError:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return "allocated" if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else f"refused ({status})"


print("LIMITS", _allocate(@BYTES@), flush=True)
'''


@pytest.mark.parametrize("memory_mb", [1536, None])
async def test_the_sandbox_limits_set_on_the_bot_are_the_ones_its_jobs_get(
    monkeypatch: pytest.MonkeyPatch, memory_mb: int | None
) -> None:
    """README's KERNELCUP_SANDBOX_MEMORY_MB, _TASKS and _FILE_MB, set in the bot's environment,
    reach every job the local runner starts: the job's isolation names them, and a submission that
    touches 2 GiB is refused under a 1.5 GiB limit (torch's own mappings need about 1 GiB where the
    limit is an rlimit on address space); the control, with no setting (the default, ¾ of RAM),
    allocates it."""
    if memory_mb is not None:
        monkeypatch.setenv("KERNELCUP_SANDBOX_MEMORY_MB", str(memory_mb))
        monkeypatch.setenv("KERNELCUP_SANDBOX_TASKS", "77")
        monkeypatch.setenv("KERNELCUP_SANDBOX_FILE_MB", "33")
    board = ROOT / "leaderboards" / "vectoradd"
    source = (board / "solutions" / "pytorch.py").read_text() + _LIMITS_PROBE.replace("@BYTES@", str(2 << 30))
    job = leaderboard_spec(board, source, Mode.TEST, device="cpu", job_id="1")
    job.task.tests = job.task.tests[:1]

    async def on_progress(event: Progress) -> None:
        return None

    result = await LocalRunner(gpu="cpu").run(job, RunContext(1, "cpu", 120), on_progress)
    assert result.status is Status.PASSED, result.verdict
    isolation = result.system.isolation
    said = [line.removeprefix("LIMITS ") for line in result.stdout.splitlines() if line.startswith("LIMITS ")]
    if memory_mb is None:
        assert said == ["allocated"]
        assert "77 tasks" not in isolation
        return
    assert said and said[0].startswith("refused"), said
    assert f"{memory_mb} MiB" in isolation and "77 tasks" in isolation and "files up to 33 MiB" in isolation, isolation
