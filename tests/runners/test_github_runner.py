"""The GitHub Actions runner against a local fake GitHub REST API (tests/runners/fake_github.py):
dispatch, finding the run, following it, the result artifact, re-attach, cancel and failures."""

from __future__ import annotations

import asyncio
import json
import math
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kernelcup.core.config import GpuConfig, Settings
from kernelcup.core.pipeline.runner import RunContext, RunnerError
from kernelcup.core.pipeline.timeouts import platform_timeout_s
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, Progress, Result, Status, TaskConfig
from kernelcup.runners.github import GitHubRunner
from tests.harness.conftest import leaderboard_spec, submission
from tests.runners.fake_github import (
    REPO,
    TOKEN,
    FakeGitHub,
    Plan,
    pack_spec,
    signed_result,
    unpack_spec,
    workflow_step,
)

LABELS = ["self-hosted", "linux", "rtx4090"]
IDENTITY = Path(__file__).resolve().parents[2] / "leaderboards" / "identity"


@pytest.fixture
async def github() -> AsyncIterator[tuple[FakeGitHub, str]]:
    fake = FakeGitHub()
    runner = web.AppRunner(fake.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield fake, f"http://127.0.0.1:{port}"
    await fake.close()
    await runner.cleanup()


def make_runner(api_url: str, token: str = TOKEN, **options: Any) -> GitHubRunner:
    settings = Settings(
        gpus={"RTX4090": GpuConfig("RTX4090", "github", options={"github_labels": LABELS})},
        runners={"github": {"repo": REPO, "poll_s": 0.02, "start_timeout_s": 0.5, "startup_s": 120,
                            "api_url": api_url, **options}},
    )
    return GitHubRunner(settings, env={"GITHUB_TOKEN": token})


def spec(timeout_s: float = 60.0, files: dict[str, str] | None = None) -> JobSpec:
    return JobSpec("7", Mode.TEST, TaskConfig(), files or {"submission.py": "x = 1"}, "submission.py", timeout_s,
                   device="cuda", gpu=GpuInfo("RTX4090"), result_key=secrets.token_hex(32))


class Recorder:
    def __init__(self) -> None:
        self.progress: list[Progress] = []
        self.refs: list[str] = []

    async def on_progress(self, event: Progress) -> None:
        self.progress.append(event)

    async def remember(self, ref: str) -> None:
        self.refs.append(ref)

    def context(self, limit_s: float = 30.0, ref: str | None = None) -> RunContext:
        return RunContext(7, "RTX4090", limit_s, ref, self.remember)


async def run(runner: GitHubRunner, job: JobSpec, recorder: Recorder, **context: Any) -> Result:
    return await runner.run(job, recorder.context(**context), recorder.on_progress)


async def test_a_job_is_dispatched_with_its_packed_spec_and_its_signed_result_returned(
    github: tuple[FakeGitHub, str],
) -> None:
    fake, url = github
    job, recorder = spec(), Recorder()
    result = await run(make_runner(url), job, recorder)
    assert (result.job_id, result.status) == ("7", Status.PASSED)
    [dispatch] = fake.dispatches
    inputs = dispatch["inputs"]
    assert dispatch["ref"] == "main" and unpack_spec(inputs) == json.loads(job.to_json())
    assert inputs["runs_on"] == '["self-hosted", "linux", "rtx4090"]'
    assert inputs["kill_after_s"] == "75"  # the harness limit plus its exit time
    assert inputs["timeout_minutes"] == str(math.ceil(platform_timeout_s(60, 120) / 60))
    [run_id] = fake.runs
    assert recorder.refs == [f"github:{inputs['kernelcup_id']}::{job.result_key}",
                             f"github:{inputs['kernelcup_id']}:{run_id}:{job.result_key}"]


async def test_progress_goes_from_queued_to_started(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(start_after_s=0.1, run_s=0.1)
    recorder = Recorder()
    await run(make_runner(url), spec(), recorder)
    assert recorder.progress == [Progress("queued"), Progress("compiling")]


async def test_the_workflow_files_harness_step_runs_the_real_harness(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(work=workflow_step)
    source = (IDENTITY / "solutions" / "pytorch.py").read_text()
    job = leaderboard_spec(IDENTITY, source, Mode.TEST, device="cpu", job_id="7")
    result = await run(make_runner(url), job, Recorder(), limit_s=120)
    assert (result.status, result.verdict) == (Status.PASSED, "all 5 tests passed")


async def test_a_failed_run_without_a_result_is_a_clear_error(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(conclusion="failure", artifact=False)
    with pytest.raises(RunnerError, match=r"ended \(failure\) without a harness result \(https://github.com/"):
        await run(make_runner(url), spec(), Recorder())


async def test_a_run_no_machine_picks_up_is_cancelled_after_the_start_timeout(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(never_starts=True)
    message = r"no GitHub runner with labels \['self-hosted', 'linux', 'rtx4090'\] picked the job up within 0.5 s"
    with pytest.raises(RunnerError, match=message) as error:
        await run(make_runner(url), spec(), Recorder())
    assert not error.value.timed_out
    assert fake.cancelled == list(fake.runs)


async def test_a_restarted_bot_re_attaches_to_its_run(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(run_s=0.3)
    recorder = Recorder()
    first = asyncio.create_task(run(make_runner(url), spec(), recorder))
    while len(recorder.refs) < 2:  # the run was found and remembered
        await asyncio.sleep(0.01)
    first.cancel()  # the bot dies
    await asyncio.gather(first, return_exceptions=True)
    result = await run(make_runner(url), spec(), Recorder(), ref=recorder.refs[-1])
    assert result.passed and len(fake.dispatches) == 1 and fake.cancelled == []


async def test_cancelling_a_job_cancels_its_run(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(run_s=30)
    runner, recorder = make_runner(url), Recorder()
    task = asyncio.create_task(run(runner, spec(), recorder))
    while len(recorder.refs) < 2:
        await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await runner.cancel(7)
    assert fake.cancelled == list(fake.runs)


async def test_a_run_past_the_runner_limit_is_cancelled_and_timed_out(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    fake.plan = Plan(run_s=30)
    with pytest.raises(RunnerError, match=r"did not finish within the runner limit of 0\.3 s") as error:
        await run(make_runner(url), spec(), Recorder(), limit_s=0.3)
    assert error.value.timed_out and fake.cancelled == list(fake.runs)


async def test_a_bad_token_is_named(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    with pytest.raises(RunnerError, match=r"GitHub refused GITHUB_TOKEN \(Bad credentials\)"):
        await run(make_runner(url, token="ghp_wrong"), spec(), Recorder())
    assert fake.dispatches == []


async def test_a_result_signed_with_another_key_is_rejected(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    forged = signed_result()

    async def work(inputs: dict[str, str]) -> dict[str, str]:
        other_key = {**unpack_spec(inputs), "result_key": secrets.token_hex(32)}
        return await forged({**inputs, "spec": pack_spec(other_key)})

    fake.plan = Plan(work=work)
    with pytest.raises(RunnerError, match="bad MAC"):
        await run(make_runner(url), spec(), Recorder())


async def test_a_spec_too_large_for_a_dispatch_is_refused_before_dispatching(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    noise = secrets.token_hex(60_000)  # does not compress
    with pytest.raises(RunnerError, match="too large for a GitHub dispatch"):
        await run(make_runner(url), spec(files={"submission.py": noise}), Recorder())
    assert fake.dispatches == []


def test_without_a_token_no_gpu_is_served_here() -> None:
    assert make_runner("http://127.0.0.1:9", token="").gpus() == []
    assert make_runner("http://127.0.0.1:9").gpus() == ["RTX4090"]


SEED = 918273645546372819


def _hunter(job: JobSpec, roots: list[str]) -> str:
    """tests/harness/fixtures/submissions/spec_hunter.py.txt for ``job``'s seed and key, which it
    holds only shifted, searching ``roots`` for files written from a minute ago on."""
    shifted = ["".join(chr(ord(c) + 1) for c in str(secret)) for secret in (SEED, job.result_key)]
    return (submission("spec_hunter.py").replace("@SEED@", shifted[0]).replace("@KEY@", shifted[1])
            .replace("@ROOTS@", repr(roots)).replace("@SINCE@", repr(time.time() - 60)))


def _ranked_hunt(roots: list[str]) -> JobSpec:
    job = leaderboard_spec(IDENTITY, "", Mode.RANKED, device="cpu", job_id="7", secret_seed=SEED, timeout_s=300)
    job.task.tests, job.task.benchmarks = job.task.tests[:1], [{"size": 4096, "seed": 5}]
    job.files[job.submission_name] = _hunter(job, roots)
    return job


def _hunts(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line.removeprefix("HUNT ")) for line in result.stdout.splitlines() if line.startswith("HUNT ")]


async def test_a_ranked_job_on_the_workflow_finds_its_seed_and_key_in_no_file_or_environment(
    github: tuple[FakeGitHub, str],
) -> None:
    """Through the workflow file's real step, a ranked job with a known secret seed and result
    key: in every process of the job the submission reads every environment and command line
    under /proc, decoding the step's base64-gzip $SPEC form too, and in the first every file it
    can open that was written during the test or lies where a job may write, and finds neither;
    then it passes. Its control is the next test."""
    fake, url = github
    fake.plan = Plan(work=workflow_step)
    job = _ranked_hunt(["/"])
    result = await run(make_runner(url), job, Recorder(), limit_s=420)
    assert result.status is Status.PASSED, result.verdict
    assert result.system.isolation.startswith("sandbox"), result.system.isolation
    hunts = _hunts(result)
    assert hunts  # the first process; each round's fresh one too, where the time left holds one
    assert hunts[0]["files"] >= 3  # the first walked the files: its own at least
    for hunt in hunts:
        assert hunt["found"] == []
        assert hunt["proc"] >= 2  # its own process's environment and command line at least


async def test_with_no_isolation_the_same_hunt_finds_the_seed_and_key_in_the_steps_environment(
    github: tuple[FakeGitHub, str],
) -> None:
    """The control of the test above: the same submission, with the harness's sandbox, uid drop
    and user namespace off, finds both in the workflow step's $SPEC, so the hunt finds what is
    there."""
    fake, url = github

    async def unsandboxed(inputs: dict[str, str]) -> dict[str, str]:  # no isolation at all: the step's uid
        off = {"KERNELCUP_HARNESS_SANDBOX": "off", "KERNELCUP_HARNESS_USER": "none", "KERNELCUP_HARNESS_USERNS": "0"}
        return await workflow_step(inputs, off)

    fake.plan = Plan(work=unsandboxed)
    control = _ranked_hunt([])  # the environments alone: the host's files are too many to read here
    result = await run(make_runner(url), control, Recorder(), limit_s=420)
    assert result.status is Status.PASSED, result.verdict
    found = [line for hunt in _hunts(result) for line in hunt["found"]]
    assert any(line.endswith(f"gzip:{SEED}") for line in found), found
    assert any(line.endswith(f"gzip:{control.result_key}") for line in found), found


async def test_a_hostile_submission_on_the_workflow_cannot_forge_a_result(
    github: tuple[FakeGitHub, str], tmp_path: Path,
) -> None:
    """Through the workflow file's real step: the submission appends a result line to every
    file under the step's temporary folders it can reach; its job's result is the harness's."""
    fake, url = github
    fake.plan = Plan(work=workflow_step)
    source = (IDENTITY / "solutions" / "pytorch.py").read_text() + (
        "\nimport glob, os\n"
        "found = [p for p in glob.glob('/tmp/**', recursive=True) if os.path.isfile(p)]\n"
        "for path in found:\n"
        "    try:\n"
        "        open(path, 'a').write('{\"event\": \"result\"}\\n')\n"
        "    except OSError:\n"
        "        pass\n"
        "print('SEEN', os.environ.get('RUNNER_TEMP'), os.environ.get('SPEC'))\n"
    )
    job = leaderboard_spec(IDENTITY, source, Mode.TEST, device="cpu", job_id="7")
    result = await run(make_runner(url), job, Recorder(), limit_s=120)
    assert result.status is Status.PASSED, result.verdict
    assert "SEEN None None" in result.stdout
    assert result.system.isolation.startswith("sandbox")


async def test_a_second_result_line_refuses_the_job(github: tuple[FakeGitHub, str]) -> None:
    fake, url = github
    one = signed_result()

    async def twice(inputs: dict[str, str]) -> dict[str, str]:
        files = await one(inputs)
        files["harness.jsonl"] += files["harness.jsonl"]
        return files

    fake.plan = Plan(work=twice)
    with pytest.raises(RunnerError, match="second result line"):
        await run(make_runner(url), spec(), Recorder())
