"""Multi-GPU leaderboards in the commands: list, show and task say so and how many GPUs a run
uses; the report names which card ran which rank and shows per-rank times where they differ."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.engine import Engine

from kernelcup.core.app import Kernelcup
from kernelcup.core.config import load_settings
from kernelcup.core.messages import Table, Text
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.harness.spec import CaseResult, JobSpec, Result, Status
from kernelcup.runners.local import LocalRunner
from tests.core.conftest import NOW, ROOT, InstantRunner, finish, request, solution


async def test_list_says_which_leaderboards_are_multi_gpu(app: Kernelcup) -> None:
    reply = await app.handle(request("list"))
    table = next(b for b in reply.blocks if isinstance(b, Table))
    gpus = {row[0]: row[2] for row in table.rows}
    assert gpus["allreduce"] == gpus["gemm_rs"] == "cpu (multi-GPU: 2 per run)"
    assert gpus["vectoradd"] == "cpu"


async def test_show_and_task_say_how_many_gpus_a_run_uses(app: Kernelcup) -> None:
    show = await app.handle(request("show", leaderboard="allreduce"))
    assert "allreduce · multi-GPU, 2 GPUs per run · deadline" in show.text()
    task = await app.handle(request("task", leaderboard="gemm_rs"))
    assert any(isinstance(b, Text) and b.text.startswith("Multi-GPU: every run uses 2 GPUs") for b in task.blocks)
    single = await app.handle(request("show", leaderboard="vectoradd"))
    assert "multi-GPU" not in single.text()


async def test_a_multi_gpu_job_gets_its_ranks_in_the_spec(app: Kernelcup, runner: InstantRunner) -> None:
    reply = await app.handle(request("submit", files={"k.py": solution("allreduce", "all_reduce.py")}, mode="test"))
    assert reply.submission_id is not None
    await finish(app, reply.submission_id)
    assert runner.specs[-1].task.world_size == 2


async def test_the_report_names_each_ranks_card_and_its_time_where_they_differ(
    app: Kernelcup, runner: InstantRunner
) -> None:
    async def ranked(spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        cases = [
            CaseResult(case={"size": 1}, passed=True, runs=20, median_ns=2e6, rank_median_ns=[1.2e6, 2e6]),
            CaseResult(case={"size": 2}, passed=True, runs=20, median_ns=3e6, rank_median_ns=[3e6, 3e6]),
        ]
        result = Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="all tests passed on 2 ranks",
                        score_s=2.5e-3, benchmarks=cases)
        result.system.ranks = ["rank 0: cuda:0 = card 2, NVIDIA H200", "rank 1: cuda:1 = card 3, NVIDIA H200"]
        return result

    runner.run = ranked  # type: ignore[method-assign]
    reply = await app.handle(request("submit", files={"k.py": solution("allreduce", "all_reduce.py")}, mode="ranked"))
    assert reply.submission_id is not None
    await finish(app, reply.submission_id)
    report = await app.submission_report(reply.submission_id)
    table = next(b for b in report.blocks if isinstance(b, Table))
    assert "per rank" in table.columns
    column = table.columns.index("per rank")
    assert [row[column] for row in table.rows] == ["r0 1.2 ms · r1 2 ms", "-"]
    assert "2 ranks: rank 0: cuda:0 = card 2, NVIDIA H200; rank 1: cuda:1 = card 3, NVIDIA H200" in report.text()


async def test_a_multi_gpu_submission_runs_end_to_end_on_the_real_local_runner(core_engine: Engine) -> None:
    """The whole path on the CPU: command, job, the local runner, the sandboxed harness, two ranks."""
    settings = replace(load_settings(env={}), leaderboards_dir=ROOT / "leaderboards")
    app = Kernelcup(settings, core_engine, {"local": LocalRunner(settings, gpu="cpu", standby=0)}, clock=lambda: NOW)
    app.sync_if_empty()
    await app.pipeline.start()
    try:
        reply = await app.handle(request("submit", files={"k.py": solution("gemm_rs", "reduce_scatter.py")},
                                         mode="test"))
        assert reply.submission_id is not None
        await finish(app, reply.submission_id)
        report = await app.submission_report(reply.submission_id)
    finally:
        await app.pipeline.stop()
    assert report.ok, report.text()
    assert "[cpu] ✅ all 4 tests passed on 2 ranks" in report.text()
    assert "2 ranks: rank 0: cpu (gloo); rank 1: cpu (gloo)" in report.text()
