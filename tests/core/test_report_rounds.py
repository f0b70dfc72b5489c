"""The report of a ranked run shows each round's median where a case has several (each round
ran in its own process); results stored before rounds were recorded still read."""

from __future__ import annotations

import json

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Table
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.harness.spec import CaseResult, JobSpec, Mode, Result, Status
from tests.core.conftest import InstantRunner, finish, request, solution


async def _benchmark_table(app: Kernelcup, runner: InstantRunner, cases: list[CaseResult]) -> Table:
    async def ranked(spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        return Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="all tests passed",
                      score_s=2.5e-3, benchmarks=cases)

    runner.run = ranked  # type: ignore[method-assign]
    reply = await app.handle(request("submit", files={"k.py": solution("vectoradd", "pytorch.py")}, mode="ranked"))
    assert reply.submission_id is not None
    await finish(app, reply.submission_id)
    report = await app.submission_report(reply.submission_id)
    return next(b for b in report.blocks if isinstance(b, Table))


async def test_the_report_shows_each_rounds_median_where_there_are_several(
    app: Kernelcup, runner: InstantRunner
) -> None:
    table = await _benchmark_table(app, runner, [
        CaseResult(case={"size": 1}, passed=True, runs=40, median_ns=2.01e6, ci_low_ns=1.98e6, ci_high_ns=2.04e6,
                   round_median_ns=[1.98e6, 2.04e6]),
        CaseResult(case={"size": 2}, passed=True, runs=20, median_ns=3e6, ci_low_ns=2.9e6, ci_high_ns=3.1e6),
    ])
    column = table.columns.index("per round")
    assert [row[column] for row in table.rows] == ["1.98 ms · 2.04 ms", "-"]


async def test_a_report_without_rounds_has_no_round_column(app: Kernelcup, runner: InstantRunner) -> None:
    table = await _benchmark_table(app, runner, [
        CaseResult(case={"size": 1}, passed=True, runs=20, median_ns=3e6, ci_low_ns=2.9e6, ci_high_ns=3.1e6),
    ])
    assert "per round" not in table.columns and table.rows


def test_a_result_stored_before_rounds_were_recorded_still_reads() -> None:
    case = {"case": {"size": 1}, "passed": True, "runs": 20, "median_ns": 3e6, "ci_low_ns": 2.9e6, "ci_high_ns": 3.1e6}
    stored = {"job_id": "j", "mode": "ranked", "status": "passed", "verdict": "ok", "benchmarks": [case], "version": 1}
    result = Result.from_json(json.dumps(stored))
    assert result.mode is Mode.RANKED and result.benchmarks[0].round_median_ns == []
