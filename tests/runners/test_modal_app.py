"""The Modal app: defined without a token, one pinned function per GPU kind, timeouts from the one
rule, and the function body running the real harness on the CPU: in-process (``.local()``) with the
real SDK, and in a container process of the stub SDK's server (tests/stubs/modal)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kernelcup.core.config import load_settings
from kernelcup.core.pipeline.runner import RunContext
from kernelcup.core.pipeline.timeouts import platform_timeout_s, runner_limit
from kernelcup.harness.spec import Mode, Progress, Result, Status, parse_line
from kernelcup.runners import modal_app
from kernelcup.runners.modal import deployment
from tests.harness.conftest import leaderboard_spec
from tests.runners.conftest import ModalStub, until

ROOT = Path(__file__).resolve().parents[2]
IDENTITY = ROOT / "leaderboards" / "identity"


def identity_spec(solution: str = "pytorch.py", job_id: str = "7") -> str:
    source = (IDENTITY / "solutions" / solution).read_text()
    return leaderboard_spec(IDENTITY, source, Mode.TEST, device="cpu", job_id=job_id).to_json()


def test_every_gpu_kind_has_a_function_pinned_to_its_exact_card() -> None:
    pinned = {f.name: f.gpu for f in modal_app.FUNCTIONS}
    assert pinned == {
        "run_t4": "T4", "run_l4": "L4", "run_a10g": "A10", "run_l40s": "L40S", "run_a100_40gb": "A100-40GB",
        "run_a100_80gb": "A100-80GB", "run_h100": "H100!", "run_h200": "H200", "run_b200": "B200",
        # several cards of one machine in one container, for multi-GPU leaderboards
        "run_h100x2": "H100!:2", "run_h100x4": "H100!:4", "run_h100x8": "H100!:8",
        "run_h200x2": "H200:2", "run_h200x4": "H200:4", "run_h200x8": "H200:8",
    }
    assert set(modal_app.GPU_FUNCTIONS) == set(pinned)


def test_the_function_timeout_outlasts_the_longest_harness_limit_plus_start_up() -> None:
    settings = load_settings(env={})
    options = settings.runners["modal"]
    longest, startup = float(options["max_harness_s"]), float(options["startup_s"])
    for function in modal_app.FUNCTIONS:
        assert function.timeout_s == platform_timeout_s(longest, startup)
        assert function.timeout_s > longest + startup
    # and the bot waits longer still: the runner limit adds the wait for a free GPU
    assert runner_limit(longest, settings.runner_grace_s("modal")) > modal_app.FUNCTIONS[0].timeout_s - startup


def test_a_gpu_kind_is_one_config_entry(tmp_path: Path) -> None:
    config = (ROOT / "config" / "kernelcup.yml").read_text().replace(
        "gpus:\n", "gpus:\n  RTX-PRO-6000: {runner: modal, modal_gpu: RTX-PRO-6000}\n", 1
    )
    (tmp_path / "kernelcup.yml").write_text(config)
    table = deployment(load_settings(tmp_path / "kernelcup.yml", env={}))["functions"]
    assert ("run_rtx_pro_6000", "RTX-PRO-6000") in [(f["name"], f["gpu"]) for f in table]


def test_the_function_body_runs_the_real_harness_and_returns_its_signed_lines() -> None:
    spec = identity_spec()
    key = json.loads(spec)["result_key"]
    output = modal_app.GPU_FUNCTIONS["run_h100"].local(spec, 120.0)
    events = [parse_line(line, key) for line in output["lines"]]
    result = events[-1]
    assert isinstance(result, Result), output["stderr"]
    assert (result.job_id, result.status, result.verdict) == ("7", Status.PASSED, "all 5 tests passed")
    assert Progress("testing", 5, 5) in events
    assert result.system.isolation.startswith("sandbox (namespaces)")  # the same sandbox as everywhere


async def test_the_runner_gets_a_failing_verdict_from_the_deployed_app_in_a_container(modal_stub: ModalStub) -> None:
    """This module's app deployed on the stub server; the call runs ``run_job`` in a container
    process (not local: progress goes to the Dict, a standby harness is started), the runner's
    real ``ModalSDK`` spawns it, polls it and reads its progress."""
    modal_stub.server.deploy(modal_stub.app.app)
    settings = load_settings(env={})
    settings = replace(settings, runners={**settings.runners, "modal": {**settings.runners["modal"], "poll_s": 0.05}})
    runner = modal_stub.runner(settings)
    spec = leaderboard_spec(IDENTITY, (IDENTITY / "solutions" / "wrong_offbyone.py").read_text(), Mode.TEST,
                            device="cpu", job_id="8")
    seen: list[Progress] = []

    async def on_progress(event: Progress) -> None:
        seen.append(event)

    result = await runner.run(spec, RunContext(8, "A10G", 240.0), on_progress)
    assert (result.job_id, result.status) == ("8", Status.FAILED), (result.verdict, result.stderr[-2000:])
    assert seen[0] == Progress("queued")
    [(app, function, _)] = modal_stub.server.spawned
    assert (app, function) == ("kernelcup", "run_a10g")
    [call_id] = modal_stub.server.calls
    published = await modal_stub.runners.ModalSDK().progress(call_id)  # what the container put in the Dict
    assert published is not None and parse_line(published, spec.result_key) == Progress("testing", 5, 5)


HANGS = "import time\n\ndef custom_kernel(data):\n    time.sleep(600)\n    return data\n"


async def test_a_cancelled_call_leaves_nothing_of_its_job_running_in_the_warm_container(
    modal_stub: ModalStub,
) -> None:
    """Modal keeps a container up after a cancelled input: the harness and the submission's
    processes must end with the input, not run on (billed, on the GPU) until the scale-down."""
    modal_stub.server.deploy(modal_stub.app.app)
    settings = load_settings(env={})
    settings = replace(settings, runners={**settings.runners, "modal": {**settings.runners["modal"], "poll_s": 0.05}})
    runner = modal_stub.runner(settings)
    spec = leaderboard_spec(IDENTITY, HANGS, Mode.TEST, device="cpu", job_id="9")
    seen: list[Progress] = []

    async def on_progress(event: Progress) -> None:
        seen.append(event)

    task = asyncio.create_task(runner.run(spec, RunContext(9, "A10G", 240.0), on_progress))
    await until(lambda: any(event.phase == "testing" for event in seen), "the submission's first test", 120)
    [call_id] = modal_stub.server.calls
    container = modal_stub.server.calls[call_id].process
    assert modal_stub.sdk.descendants(container.pid)  # the harness and the submission's processes
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await runner.cancel(9)
    await until(lambda: not modal_stub.sdk.descendants(container.pid), "the job's processes' end", 60)
    assert container.poll() is None  # the container itself stays warm


def test_a_hanging_harness_is_killed_at_the_remote_limit() -> None:
    hang = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    output = modal_app.run_harness("{}", 0.5, command=hang)
    assert output["returncode"] == -9 and output["lines"] == ["started"]


def test_a_warm_container_hands_each_call_the_harness_started_after_the_last() -> None:
    pid = [sys.executable, "-c", "import os, sys; sys.stdin.read(); print(os.getpid())"]
    modal_app._standby.clear()
    try:
        first = modal_app.run_harness("{}", 10.0, command=pid, standby=True)
        waiting = modal_app._standby[0].process.pid
        second = modal_app.run_harness("{}", 10.0, command=pid, standby=True)
        assert second["lines"] == [str(waiting)] and first["lines"] != second["lines"]
        modal_app._standby[0].process.kill()  # a standby that died is skipped, not used
        modal_app._standby[0].process.wait()
        third = modal_app.run_harness("{}", 10.0, command=pid, standby=True)
        assert third["returncode"] == 0 and third["lines"][0].isdigit()
    finally:
        for started in modal_app._standby:
            started.process.kill()
            started.process.wait()
        modal_app._standby.clear()


def test_the_harness_gets_none_of_the_bots_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = secrets.token_hex(8)
    monkeypatch.setenv("DISCORD_TOKEN", secret)
    monkeypatch.setenv("KERNELCUP_DATABASE_URL", f"postgresql://u:{secret}@db/x")
    dump = [sys.executable, "-c", "import os; print(repr(dict(os.environ)))"]
    output = modal_app.run_harness("{}", 10.0, command=dump)
    assert output["returncode"] == 0 and secret not in output["lines"][0]


def test_the_container_defines_the_same_functions_from_the_baked_table_without_core() -> None:
    probe = (
        "import sys; sys.modules['kernelcup.core'] = None; sys.modules['yaml'] = None\n"  # neither is in the image
        "import kernelcup.runners.modal_app as m; print(sorted(m.GPU_FUNCTIONS))"
    )
    env = {**os.environ, modal_app.TABLE_ENV: json.dumps(modal_app.DEPLOYMENT)}
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=60)
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == str(sorted(modal_app.GPU_FUNCTIONS))


def test_a_deploy_from_the_checkout_puts_this_app_and_the_harness_under_kernelcup_in_the_image() -> None:
    """What the container gets: Modal's own mount of the app's top package (``kernelcup``, which it
    walks without following the links of a checkout) and the image's sources, as Modal lists the
    files to upload (a private API: ``modal.mount._Mount``)."""
    from modal.mount import _Mount

    def remote_files(*packages: str) -> set[str]:
        mount = _Mount._from_local_python_packages(*packages)
        return {str(remote) for entry in mount.entries for _, remote in entry.get_files_to_upload()}

    uploaded = remote_files("kernelcup") | remote_files(*modal_app.IMAGE_SOURCES)
    assert {"/root/kernelcup/__init__.py", "/root/kernelcup/runners/__init__.py",
            "/root/kernelcup/runners/modal_app.py", "/root/kernelcup/harness/__main__.py",
            "/root/kernelcup/harness/child.py", "/root/kernelcup/harness/sandbox.py"} <= uploaded
    assert not any(path.startswith(("/root/kernelcup/core/", "/root/harness/", "/root/runners/")) for path in uploaded)
