"""The Modal runner and its real client (``ModalSDK``) against the stub ``modal`` SDK and its
local server (tests/stubs/modal): submit, poll, progress, re-attach after a restart, limits,
cancel, and each Modal failure as a clear error. Each call runs in a container process that runs
``modal_app.run_harness`` on a scripted harness (tests/runners/scripted_harness.py)."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelcup.core.config import GpuConfig, Settings
from kernelcup.core.pipeline.runner import RunContext, RunnerError
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, Progress, Result, Status, TaskConfig
from kernelcup.runners.modal import ModalRunner, ModalSDK
from tests.runners import modal_functions
from tests.runners.conftest import ModalStub, process_gone, until
from tests.runners.scripted_harness import Script

H100 = GpuConfig("H100", "modal", 3350, 989, {"modal_gpu": "H100!"})
T4 = GpuConfig("T4", "modal", 320, 65, {"modal_gpu": "T4"})
SETTINGS = Settings(
    gpus={"H100": H100, "T4": T4, "cpu": GpuConfig("cpu", "local")},
    runners={"modal": {"poll_s": 0.02, "max_harness_s": 300, "startup_s": 60}},
)


def spec(job_id: int = 7, timeout_s: float = 60.0) -> JobSpec:
    return JobSpec(str(job_id), Mode.TEST, TaskConfig(), {"submission.py": "x = 1"}, "submission.py", timeout_s,
                   device="cuda", gpu=GpuInfo("H100"), result_key=secrets.token_hex(32))


class Recorder:
    """The pipeline's side of a run: progress seen, references remembered."""

    def __init__(self) -> None:
        self.progress: list[Progress] = []
        self.refs: list[str] = []

    async def on_progress(self, event: Progress) -> None:
        self.progress.append(event)

    async def remember(self, ref: str) -> None:
        self.refs.append(ref)

    def context(self, job_id: int = 7, gpu: str = "H100", limit_s: float = 60.0, ref: str | None = None) -> RunContext:
        return RunContext(job_id, gpu, limit_s, ref, self.remember)


async def run(runner: Any, job: JobSpec, recorder: Recorder, **context: Any) -> Result:
    result: Result = await runner.run(job, recorder.context(**context), recorder.on_progress)
    return result


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def modal(modal_stub: ModalStub) -> ModalStub:
    """Signed in, with ``kernelcup`` deployed: H100 and T4 functions whose harness passes."""
    modal_stub.deploy({"run_h100": Script(), "run_t4": Script(gpu="Tesla T4")})
    return modal_stub


def hanging(modal: ModalStub, **script: Any) -> tuple[Path, Path]:
    """Deploy an H100 function whose harness waits at a gate; the gate, and its pid file."""
    gate, pid_file = modal.gate(), modal.tmp_path / "harness.pid"
    modal.deploy({"run_h100": Script(gate=str(gate), pid_file=str(pid_file), **script)})
    return gate, pid_file


async def test_a_job_is_spawned_on_its_cards_function_and_its_signed_result_returned(
    modal: ModalStub, recorder: Recorder
) -> None:
    job = spec()
    result = await run(modal.runner(SETTINGS), job, recorder)
    assert (result.job_id, result.status) == ("7", Status.PASSED)
    [(app, function, args)] = modal.server.spawned
    assert (app, function) == ("kernelcup", "run_h100")
    assert args == (job.to_json(), 60.0 + 15.0)  # the harness limit plus its exit time
    [call_id] = modal.server.calls
    assert recorder.refs == [f"modal:{call_id}:{job.result_key}"]


async def test_the_call_is_remembered_before_the_result_is_awaited(modal: ModalStub, recorder: Recorder) -> None:
    gate, _ = hanging(modal)
    task = asyncio.create_task(run(modal.runner(SETTINGS), spec(), recorder))
    await until(lambda: recorder.refs, "the call's reference")
    assert not task.done()
    gate.touch()
    assert (await task).passed


async def test_progress_goes_from_queued_to_the_harness_phases(modal: ModalStub, recorder: Recorder) -> None:
    gate, _ = hanging(modal, progress=[("testing", 1, 2), ("testing", 2, 2)])
    task = asyncio.create_task(run(modal.runner(SETTINGS), spec(), recorder))
    await until(lambda: Progress("testing", 2, 2) in recorder.progress, "the harness's last progress line")
    gate.touch()
    await task
    # the Dict holds the latest line only: the runner may or may not have seen the first
    assert recorder.progress[0] == Progress("queued") and recorder.progress[-1] == Progress("testing", 2, 2)
    assert all(event in (Progress("testing", 1, 2), Progress("testing", 2, 2)) for event in recorder.progress[1:])


async def test_a_restarted_bot_re_attaches_to_the_running_call_instead_of_spawning_again(
    modal: ModalStub, recorder: Recorder
) -> None:
    gate, pid_file = hanging(modal)
    first = asyncio.create_task(run(modal.runner(SETTINGS), spec(), recorder))
    await until(pid_file.exists, "the harness in the container")
    first.cancel()  # the bot dies; Modal's call runs on
    await asyncio.gather(first, return_exceptions=True)

    again = Recorder()
    later = asyncio.create_task(run(modal.runner(SETTINGS), spec(), again, ref=recorder.refs[0]))
    await until(lambda: again.progress, "the re-attached run")
    gate.touch()
    result = await later
    assert result.passed and len(modal.server.calls) == 1 and modal.server.cancelled == []
    assert again.refs == []  # nothing new to remember


async def test_a_call_that_finished_while_the_bot_was_down_gives_its_result_at_once(
    modal: ModalStub, recorder: Recorder
) -> None:
    job = spec()
    call_id = await modal.runners.ModalSDK().spawn("kernelcup", "run_h100", job.to_json(), 75.0)
    await asyncio.to_thread(modal.server.wait_until_ended, call_id, 60)
    fresh = replace(job, result_key=secrets.token_hex(32))  # a rebuilt spec has a new key
    ref = f"modal:{call_id}:{job.result_key}"
    result = await run(modal.runner(SETTINGS), fresh, recorder, ref=ref)
    assert result.passed and len(modal.server.calls) == 1


async def test_a_re_attached_call_whose_output_expired_is_run_once_more(modal: ModalStub, recorder: Recorder) -> None:
    old = await modal.runners.ModalSDK().spawn("kernelcup", "run_h100", spec().to_json(), 75.0)
    await asyncio.to_thread(modal.server.expire, old)
    job = spec()
    result = await run(modal.runner(SETTINGS), job, recorder, ref=f"modal:{old}:{'ab' * 32}")
    assert result.passed and len(modal.server.calls) == 2
    assert recorder.refs == [f"modal:{list(modal.server.calls)[1]}:{job.result_key}"]


async def test_another_runners_reference_is_ignored(modal: ModalStub, recorder: Recorder) -> None:
    result = await run(modal.runner(SETTINGS), spec(), recorder, ref="github:42")
    assert result.passed and len(modal.server.calls) == 1


async def test_a_call_past_the_runner_limit_is_cancelled_and_timed_out(modal: ModalStub, recorder: Recorder) -> None:
    hanging(modal)  # never finishes, e.g. no free GPU
    with pytest.raises(RunnerError) as error:
        await run(modal.runner(SETTINGS), spec(), recorder, limit_s=1.0)
    assert error.value.timed_out
    assert "within the runner limit of 1 s" in str(error.value)
    [call_id] = modal.server.calls
    assert modal.server.cancelled == [call_id]
    with pytest.raises(modal.errors.RemoteError):  # the input ended as terminated
        await modal.runners.ModalSDK().get(call_id, timeout=60)


async def test_modals_function_timeout_is_a_timed_out_job(modal: ModalStub, recorder: Recorder) -> None:
    modal.deploy({"run_h100": Script(gate=str(modal.gate()))}, timeout=1)  # the container is stopped at 1 s
    with pytest.raises(RunnerError) as error:
        await run(modal.runner(SETTINGS), spec(), recorder)
    assert error.value.timed_out
    assert str(error.value) == "Modal stopped the run at its function timeout of 375 s"  # 300 + 15 + 60


async def test_cancelling_a_job_ends_its_modal_call_and_the_harness_in_it(
    modal: ModalStub, recorder: Recorder
) -> None:
    _, pid_file = hanging(modal)
    runner = modal.runner(SETTINGS)
    task = asyncio.create_task(run(runner, spec(), recorder))
    await until(pid_file.exists, "the harness in the container")
    harness = int(pid_file.read_text())
    task.cancel()  # the pipeline cancels the job's task, then asks the runner
    await asyncio.gather(task, return_exceptions=True)
    await runner.cancel(7)
    [call_id] = modal.server.calls
    assert modal.server.cancelled == [call_id]
    with pytest.raises(modal.errors.RemoteError):  # the input ended as terminated
        await modal.runners.ModalSDK().get(call_id, timeout=60)
    await until(lambda: process_gone(harness), "the harness's end")
    await runner.cancel(7)  # a second time, or an unknown job: nothing
    assert len(modal.server.cancelled) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (modal_functions.segfaults, r"container failed: Container crashed with exit code 139"),
        (modal_functions.raises_what_only_the_container_knows, "container failed: Could not deserialize"),
        (modal_functions.raises_value_error, "raised ValueError: bug in the function body"),
    ],
)
async def test_a_failed_call_is_a_clear_error(modal: ModalStub, recorder: Recorder, body: Any, message: str) -> None:
    modal.deploy({"run_h100": body})
    with pytest.raises(RunnerError, match=message) as raised:
        await run(modal.runner(SETTINGS), spec(), recorder)
    assert not raised.value.timed_out


async def test_a_container_killed_for_its_memory_is_a_clear_error(modal: ModalStub, recorder: Recorder) -> None:
    _, pid_file = hanging(modal)
    task = asyncio.create_task(run(modal.runner(SETTINGS), spec(), recorder))
    await until(pid_file.exists, "the harness in the container")
    [call_id] = modal.server.calls
    modal.server.kill(call_id, modal.errors.RemoteError("Task was killed: out of memory (kernel OOM kill)"))
    with pytest.raises(RunnerError, match="ran out of memory") as raised:
        await task
    assert not raised.value.timed_out


async def test_a_quota_refusal_is_a_clear_error(modal: ModalStub, recorder: Recorder) -> None:
    modal.server.refuse_spawns = modal.errors.ResourceExhaustedError("GPU quota exceeded for workspace")
    with pytest.raises(RunnerError, match="quota or rate limit was reached"):
        await run(modal.runner(SETTINGS), spec(), recorder)
    assert recorder.refs == []


async def test_an_undeployed_function_says_how_to_deploy(modal_stub: ModalStub, recorder: Recorder) -> None:
    modal_stub.deploy({"run_t4": Script()})
    with pytest.raises(RunnerError,
                       match=r"run_h100 of app 'kernelcup' not found.*modal deploy -m kernelcup.runners.modal_app"):
        await run(modal_stub.runner(SETTINGS), spec(), recorder)


async def test_missing_credentials_are_named_by_the_sdk(modal: ModalStub, recorder: Recorder) -> None:
    modal.sign_in(False)
    with pytest.raises(RunnerError, match="set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        await run(modal.runner(SETTINGS), spec(), recorder)
    assert modal.server.spawned == []


async def test_missing_credentials_are_named_by_the_real_modal_package(recorder: Recorder) -> None:
    if ModalSDK().configured():
        pytest.skip("this machine has Modal credentials; the test must not reach Modal")
    with pytest.raises(RunnerError, match="set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        await run(ModalRunner(SETTINGS), spec(), recorder)


async def test_a_result_signed_with_another_key_is_rejected(modal: ModalStub, recorder: Recorder) -> None:
    modal.deploy({"run_h100": Script(key=secrets.token_hex(32))})
    with pytest.raises(RunnerError, match="bad MAC"):
        await run(modal.runner(SETTINGS), spec(), recorder)


async def test_a_result_from_another_card_is_discarded(modal: ModalStub, recorder: Recorder) -> None:
    modal.deploy({"run_h100": Script(gpu="NVIDIA H200")})
    with pytest.raises(RunnerError, match="on 'NVIDIA H200', not on a H100; its result was discarded"):
        await run(modal.runner(SETTINGS), spec(), recorder)


async def test_a_harness_that_died_without_a_result_shows_its_stderr(modal: ModalStub, recorder: Recorder) -> None:
    modal.deploy({"run_h100": Script(die_saying="Traceback ...\nMemoryError\n")})
    with pytest.raises(RunnerError, match=r"exited with code -9 without a result.*\nTraceback ...\nMemoryError"):
        await run(modal.runner(SETTINGS), spec(), recorder)


async def test_a_harness_limit_beyond_the_deployed_timeout_is_refused_before_spawning(
    modal: ModalStub, recorder: Recorder
) -> None:
    with pytest.raises(RunnerError, match=r"raise runners\.modal\.max_harness_s and redeploy"):
        await run(modal.runner(SETTINGS), spec(timeout_s=301), recorder)
    assert modal.server.spawned == []


def test_without_credentials_no_gpu_is_served_here(modal: ModalStub) -> None:
    modal.sign_in(False)
    assert modal.runner(SETTINGS).gpus() == []
    modal.sign_in()
    assert modal.runner(SETTINGS).gpus() == ["H100", "T4"]


H100X2 = GpuConfig("H100x2", "modal", 3350, 989, {"modal_gpu": "H100!:2"}, count=2)
MULTI = replace(SETTINGS, gpus={**SETTINGS.gpus, "H100x2": H100X2})
RANKS = ["rank 0: cuda:0 = card 0, NVIDIA H100 80GB HBM3", "rank 1: cuda:1 = card 1, NVIDIA H100 80GB HBM3"]


async def test_a_multi_gpu_job_runs_on_its_multi_card_function(modal_stub: ModalStub, recorder: Recorder) -> None:
    modal_stub.deploy({"run_h100x2": Script(ranks=RANKS)})
    result = await run(modal_stub.runner(MULTI), spec(), recorder, gpu="H100x2")
    assert result.passed and result.system.ranks == RANKS
    assert [function for _, function, _ in modal_stub.server.spawned] == ["run_h100x2"]


async def test_a_multi_gpu_result_with_a_rank_on_another_card_is_discarded(
    modal_stub: ModalStub, recorder: Recorder
) -> None:
    modal_stub.deploy({"run_h100x2": Script(ranks=[RANKS[0], "rank 1: cuda:1 = card 1, NVIDIA H200"])})
    with pytest.raises(RunnerError, match=r"another card \(rank 1: cuda:1 = card 1, NVIDIA H200\)"):
        await run(modal_stub.runner(MULTI), spec(), recorder, gpu="H100x2")
