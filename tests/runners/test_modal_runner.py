"""The Modal runner against a local Modal stand-in (tests/runners/fake_modal.py): submit, poll,
progress, re-attach after a restart, limits, cancel, and each Modal failure as a clear error."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import replace
from typing import Any

import modal.exception
import pytest

from kernelcup.core.config import GpuConfig, Settings
from kernelcup.core.pipeline.runner import RunContext, RunnerError
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, Progress, Result, Status, TaskConfig
from kernelcup.runners.modal import ModalRunner, ModalSDK
from tests.runners.fake_modal import FakeModal, failing, harness_output

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

    def context(self, job_id: int = 7, gpu: str = "H100", limit_s: float = 30.0, ref: str | None = None) -> RunContext:
        return RunContext(job_id, gpu, limit_s, ref, self.remember)


async def run(runner: ModalRunner, job: JobSpec, recorder: Recorder, **context: Any) -> Result:
    return await runner.run(job, recorder.context(**context), recorder.on_progress)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


async def test_a_job_is_spawned_on_its_cards_function_and_its_signed_result_returned(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output())
    job = spec()
    result = await run(ModalRunner(SETTINGS, client=modal_side), job, recorder)
    assert (result.job_id, result.status) == ("7", Status.PASSED)
    [(call_id, call)] = modal_side.calls.items()
    assert call.function == "run_h100"
    assert call.args == (job.to_json(), 60.0 + 15.0)  # the harness limit plus its exit time
    assert recorder.refs == [f"modal:{call_id}:{job.result_key}"]


async def test_the_call_is_remembered_before_the_result_is_awaited(recorder: Recorder) -> None:
    gate = asyncio.Event()
    runner = ModalRunner(SETTINGS, client=FakeModal(harness_output(gate=gate)))
    task = asyncio.create_task(run(runner, spec(), recorder))
    while not recorder.refs:
        await asyncio.sleep(0.01)
    assert not task.done()
    gate.set()
    assert (await task).passed


async def test_progress_goes_from_queued_to_the_harness_phases(recorder: Recorder) -> None:
    gate = asyncio.Event()
    phases = [Progress("testing", 1, 2), Progress("testing", 2, 2)]
    runner = ModalRunner(SETTINGS, client=FakeModal(harness_output(progress=phases, gate=gate)))
    task = asyncio.create_task(run(runner, spec(), recorder))
    while Progress("testing", 2, 2) not in recorder.progress:
        await asyncio.sleep(0.01)
    gate.set()
    await task
    assert recorder.progress == [Progress("queued"), Progress("testing", 2, 2)]


async def test_a_restarted_bot_re_attaches_to_the_running_call_instead_of_spawning_again(recorder: Recorder) -> None:
    gate = asyncio.Event()
    modal_side = FakeModal(harness_output(gate=gate))
    first = asyncio.create_task(run(ModalRunner(SETTINGS, client=modal_side), spec(), recorder))
    while not recorder.refs:
        await asyncio.sleep(0.01)
    first.cancel()  # the bot dies; Modal's call runs on
    await asyncio.gather(first, return_exceptions=True)

    again = Recorder()
    later = asyncio.create_task(run(ModalRunner(SETTINGS, client=modal_side), spec(), again, ref=recorder.refs[0]))
    await asyncio.sleep(0.05)
    gate.set()
    result = await later
    assert result.passed and len(modal_side.calls) == 1 and modal_side.cancelled == []
    assert again.refs == []  # nothing new to remember


async def test_a_call_that_finished_while_the_bot_was_down_gives_its_result_at_once(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output())
    job = spec()
    call_id = await modal_side.spawn("kernelcup", "run_h100", job.to_json(), 75.0)
    await asyncio.sleep(0.05)
    fresh = replace(job, result_key=secrets.token_hex(32))  # a rebuilt spec has a new key
    ref = f"modal:{call_id}:{job.result_key}"
    result = await run(ModalRunner(SETTINGS, client=modal_side), fresh, recorder, ref=ref)
    assert result.passed and len(modal_side.calls) == 1


async def test_a_re_attached_call_whose_output_expired_is_run_once_more(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output())
    old = await modal_side.spawn("kernelcup", "run_h100", spec().to_json(), 75.0)
    modal_side.calls[old].expired = True
    job = spec()
    result = await run(ModalRunner(SETTINGS, client=modal_side), job, recorder, ref=f"modal:{old}:{'ab' * 32}")
    assert result.passed and len(modal_side.calls) == 2
    assert recorder.refs == [f"modal:{list(modal_side.calls)[1]}:{job.result_key}"]


async def test_another_runners_reference_is_ignored(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output())
    result = await run(ModalRunner(SETTINGS, client=modal_side), spec(), recorder, ref="github:42")
    assert result.passed and len(modal_side.calls) == 1


async def test_a_call_past_the_runner_limit_is_cancelled_and_timed_out(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output(gate=asyncio.Event()))  # never finishes, e.g. no free GPU
    with pytest.raises(RunnerError) as error:
        await run(ModalRunner(SETTINGS, client=modal_side), spec(), recorder, limit_s=0.2)
    assert error.value.timed_out
    assert "within the runner limit of 0.2 s" in str(error.value)
    assert modal_side.cancelled == list(modal_side.calls)


async def test_modals_function_timeout_is_a_timed_out_job(recorder: Recorder) -> None:
    modal_side = FakeModal(failing(modal.exception.FunctionTimeoutError("Function timed out")))
    with pytest.raises(RunnerError) as error:
        await run(ModalRunner(SETTINGS, client=modal_side), spec(), recorder)
    assert error.value.timed_out
    assert str(error.value) == "Modal stopped the run at its function timeout of 375 s"  # 300 + 15 + 60


async def test_cancelling_a_job_cancels_its_modal_call(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output(gate=asyncio.Event()))
    runner = ModalRunner(SETTINGS, client=modal_side)
    task = asyncio.create_task(run(runner, spec(), recorder))
    while not recorder.refs:
        await asyncio.sleep(0.01)
    task.cancel()  # the pipeline cancels the job's task, then asks the runner
    await asyncio.gather(task, return_exceptions=True)
    await runner.cancel(7)
    assert modal_side.cancelled == list(modal_side.calls)
    await runner.cancel(7)  # a second time, or an unknown job: nothing
    assert len(modal_side.cancelled) == 1


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (modal.exception.RemoteError("Task was killed: out of memory (kernel OOM kill)"), "ran out of memory"),
        (modal.exception.RemoteError("Container crashed with exit code 139"), "container failed: Container crashed"),
        (modal.exception.ExecutionError("Could not deserialize remote exception"), "container failed"),
        (ValueError("bug in the function body"), "raised ValueError: bug in the function body"),
    ],
)
async def test_a_failed_call_is_a_clear_error(recorder: Recorder, error: Exception, message: str) -> None:
    with pytest.raises(RunnerError, match=message) as raised:
        await run(ModalRunner(SETTINGS, client=FakeModal(failing(error))), spec(), recorder)
    assert not raised.value.timed_out


async def test_a_quota_refusal_is_a_clear_error(recorder: Recorder) -> None:
    refusal = modal.exception.ResourceExhaustedError("GPU quota exceeded for workspace")
    with pytest.raises(RunnerError, match="quota or rate limit was reached"):
        await run(ModalRunner(SETTINGS, client=FakeModal(harness_output(), spawn_error=refusal)), spec(), recorder)
    assert recorder.refs == []


async def test_an_undeployed_function_says_how_to_deploy(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output(), functions=("run_t4",))
    with pytest.raises(RunnerError,
                       match=r"run_h100 of app 'kernelcup' not found.*modal deploy -m kernelcup.runners.modal_app"):
        await run(ModalRunner(SETTINGS, client=modal_side), spec(), recorder)


async def test_missing_credentials_are_named_by_the_real_sdk(recorder: Recorder) -> None:
    if ModalSDK().configured():
        pytest.skip("this machine has Modal credentials; the test must not reach Modal")
    with pytest.raises(RunnerError, match="set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"):
        await run(ModalRunner(SETTINGS), spec(), recorder)


async def test_a_result_signed_with_another_key_is_rejected(recorder: Recorder) -> None:
    forged = FakeModal(harness_output(key=secrets.token_hex(32)))
    with pytest.raises(RunnerError, match="bad MAC"):
        await run(ModalRunner(SETTINGS, client=forged), spec(), recorder)


async def test_a_result_from_another_card_is_discarded(recorder: Recorder) -> None:
    upgraded = FakeModal(harness_output(gpu="NVIDIA H200"))
    with pytest.raises(RunnerError, match="on 'NVIDIA H200', not on a H100; its result was discarded"):
        await run(ModalRunner(SETTINGS, client=upgraded), spec(), recorder)


async def test_a_harness_that_died_without_a_result_shows_its_stderr(recorder: Recorder) -> None:
    async def died(spec_json: str, kill_after_s: float, report: Any) -> dict[str, Any]:
        return {"lines": [], "returncode": -9, "stderr": "Traceback ...\nMemoryError"}

    with pytest.raises(RunnerError, match=r"exited with code -9 without a result.*\nTraceback ...\nMemoryError"):
        await run(ModalRunner(SETTINGS, client=FakeModal(died)), spec(), recorder)


async def test_a_harness_limit_beyond_the_deployed_timeout_is_refused_before_spawning(recorder: Recorder) -> None:
    modal_side = FakeModal(harness_output())
    with pytest.raises(RunnerError, match=r"raise runners\.modal\.max_harness_s and redeploy"):
        await run(ModalRunner(SETTINGS, client=modal_side), spec(timeout_s=301), recorder)
    assert modal_side.calls == {}


def test_without_credentials_no_gpu_is_served_here() -> None:
    assert ModalRunner(SETTINGS, client=FakeModal(harness_output(), credentials=False)).gpus() == []
    assert ModalRunner(SETTINGS, client=FakeModal(harness_output())).gpus() == ["H100", "T4"]


H100X2 = GpuConfig("H100x2", "modal", 3350, 989, {"modal_gpu": "H100!:2"}, count=2)
MULTI = replace(SETTINGS, gpus={**SETTINGS.gpus, "H100x2": H100X2})
RANKS = ["rank 0: cuda:0 = card 0, NVIDIA H100 80GB HBM3", "rank 1: cuda:1 = card 1, NVIDIA H100 80GB HBM3"]


async def test_a_multi_gpu_job_runs_on_its_multi_card_function(recorder: Recorder) -> None:
    modal = FakeModal(harness_output(ranks=RANKS), functions=("run_h100x2",))
    result = await run(ModalRunner(MULTI, client=modal), spec(), recorder, gpu="H100x2")
    assert result.passed and result.system.ranks == RANKS
    assert [call.function for call in modal.calls.values()] == ["run_h100x2"]


async def test_a_multi_gpu_result_with_a_rank_on_another_card_is_discarded(recorder: Recorder) -> None:
    mixed = FakeModal(harness_output(ranks=[RANKS[0], "rank 1: cuda:1 = card 1, NVIDIA H200"]),
                      functions=("run_h100x2",))
    with pytest.raises(RunnerError, match=r"another card \(rank 1: cuda:1 = card 1, NVIDIA H200\)"):
        await run(ModalRunner(MULTI, client=mixed), spec(), recorder, gpu="H100x2")
