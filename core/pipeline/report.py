"""A submission's outcome as neutral reply blocks, built once and rendered by every adapter."""

from __future__ import annotations

import json

from sqlmodel import Session, col, select

from kernelcup.core.access.visibility import Sight, status_words
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.leaderboards.ranking import rank_of
from kernelcup.core.messages import Block, File, Reply, Table, Text
from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import Job, JobStatus, Leaderboard, Run, Submission, User
from kernelcup.harness.spec import CaseResult, Result, SpecError, Status

_ICON = {True: "✅", False: "❌"}


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.4g} {unit}"
    return f"{seconds / 1e-9:.4g} ns"


def format_case(case: dict[str, object]) -> str:
    return ", ".join(f"{k}={v}" for k, v in case.items())


def submission_reply(session: Session, submission_id: int, sight: Sight) -> Reply:
    """The report of a submission as ``sight`` (``kernelcup.core.access.visibility.sight_of``)
    lets its viewer see it: the author gets verdicts, messages, logs and profiles; others each
    job's public verdict, timings and score."""
    submission = session.get(Submission, submission_id)
    if submission is None:
        return Reply.error(f"There is no submission #{submission_id}.")
    board = session.get(Leaderboard, submission.leaderboard_id)
    user = session.get(User, submission.user_id)
    assert board is not None and user is not None
    jobs = session.exec(
        select(Job).where(Job.submission_id == submission_id).order_by(col(Job.id))
    ).all()
    runs = {
        run.job_id: run
        for run in session.exec(select(Run).where(Run.submission_id == submission_id)).all()
    }
    blocks: list[Block] = [
        Text(
            f"Submission #{submission.id}: {shown_file_name(submission.file_name)} to {board.name} "
            f"({submission.mode}) by {user.display_name}, "
            f"{as_utc(submission.created_at):%Y-%m-%d %H:%M} UTC",
            style="title",
        )
    ]
    files: list[Block] = []
    all_passed = bool(jobs)
    for job in jobs:
        run = runs.get(job.id) if job.id is not None else None
        line, passed = _job_line(session, job, run, board, sight)
        all_passed &= passed
        blocks.append(Text(line, style="success" if passed else "error"))
        if run is None:
            continue
        result = _result_of(run)
        if result is None:
            continue
        if result.benchmarks:
            blocks.append(_benchmark_table(job.gpu, result.benchmarks))
            clock = clock_note(result)
            if clock:
                blocks.append(Text(clock, style="hint"))
        if result.system.ranks:
            blocks.append(Text(ranks_note(result), style="hint"))
        if sight.private:
            files.extend(_result_files(submission_id, job.gpu, result))
    return Reply(blocks=blocks + files, ok=all_passed, submission_id=None)


def clock_note(result: Result) -> str:
    """What the GPU's clock did while the benchmarks ran, when it was watched: e.g.
    "GPU clock 1755-1980 MHz, memory 2619 MHz, up to 64 °C, 690 W at most; held down by power
    cap at times"."""
    system = result.system
    if system.sm_clock_mhz_min is None or system.sm_clock_mhz_max is None:
        return ""
    low, high = system.sm_clock_mhz_min, system.sm_clock_mhz_max
    note = f"GPU clock {low:.0f} MHz" if low == high else f"GPU clock {low:.0f}-{high:.0f} MHz"
    slow, fast = system.memory_clock_mhz_min, system.memory_clock_mhz_max
    if slow is not None and fast is not None:
        note += f", memory {slow:.0f} MHz" if slow == fast else f", memory {slow:.0f}-{fast:.0f} MHz"
    if system.gpu_temp_c_max is not None:
        note += f", up to {system.gpu_temp_c_max:.0f} °C"
    if system.power_w_max is not None:
        note += f", {system.power_w_max:.0f} W at most"
    if system.clock_limits:
        note += f"; held down by {', '.join(system.clock_limits)} at times: timings may read slow"
    return note


def ranks_note(result: Result) -> str:
    """Which card ran which rank of a multi-GPU job, and how a call was timed."""
    return (f"{len(result.system.ranks)} ranks: " + "; ".join(result.system.ranks)
            + ". A call's time is its slowest rank's, from one barrier-aligned start.")


def rank_times(case: CaseResult) -> str:
    """Each rank's median where the ranks differ by more than 2% (else ""): "r0 1.2 ms · r1 1.4 ms"."""
    medians = case.rank_median_ns
    if len(medians) < 2 or max(medians) <= 1.02 * min(medians):
        return ""
    return " · ".join(f"r{rank} {format_seconds(value * 1e-9)}" for rank, value in enumerate(medians))


def round_times(case: CaseResult) -> str:
    """Each kept round's median where a ranked case has several (else ""): "1.21 ms · 1.23 ms".
    Each round ran in its own process; their spread is part of the case's interval."""
    if len(case.round_median_ns) < 2:
        return ""
    return " · ".join(format_seconds(value * 1e-9) for value in case.round_median_ns)


def _job_line(session: Session, job: Job, run: Run | None, board: Leaderboard, sight: Sight) -> tuple[str, bool]:
    status = JobStatus(job.status)
    if not status.finished:
        return f"[{job.gpu}] {job.progress or status.value}", False
    if run is None:
        reason = sight.job_error(job.error) or status_words(status.value)
        return f"[{job.gpu}] {_ICON[False]} {reason}", False
    result = _result_of(run)
    verdict = sight.verdict(result) if result else "unreadable result"
    line = f"[{job.gpu}] {_ICON[run.passed]} {verdict}"
    if run.passed and run.score is not None:
        if "score" not in verdict:  # a timed run's own verdict names its score: say it once
            line += f" · score {format_seconds(run.score)}"
        if run.mode == "ranked" and board.id is not None:
            rank = rank_of(session, board.id, job.gpu, run.user_id)
            if rank is not None:
                line += f" · rank {rank} on {job.gpu}"
    return line, run.passed


def _result_of(run: Run) -> Result | None:
    try:
        return Result.from_json(run.result_json)
    except (SpecError, json.JSONDecodeError):
        return None


def _benchmark_table(gpu: str, cases: list[CaseResult]) -> Table:
    rows = []
    per_rank = any(rank_times(case) for case in cases)
    per_round = any(round_times(case) for case in cases)
    for case in cases:
        ci = (
            f"{format_seconds(case.ci_low_ns * 1e-9)} – {format_seconds(case.ci_high_ns * 1e-9)}"
            if case.ci_low_ns is not None and case.ci_high_ns is not None
            else "-"
        )
        throughput = " ".join(
            part
            for part in (
                f"{case.gbps:.0f} GB/s" if case.gbps else "",
                f"{case.tflops:.3g} TFLOP/s" if case.tflops and case.tflops >= 0.01 else "",
                f"({case.percent_of_peak:.0f}% of peak)" if case.percent_of_peak else "",
            )
            if part
        )
        rows.append(
            (
                format_case(case.case),
                format_seconds(case.median_ns * 1e-9 if case.median_ns is not None else None),
                ci,
                format_seconds(case.min_ns * 1e-9 if case.min_ns is not None else None),
                str(case.runs),
                throughput or "-",
                *((rank_times(case) or "-",) if per_rank else ()),
                *((round_times(case) or "-",) if per_round else ()),
                _ICON[case.passed],
            )
        )
    columns = ("case", "median", "95% CI of median", "min", "runs", "throughput")
    return Table(
        columns=(*columns, *(("per rank",) if per_rank else ()), *(("per round",) if per_round else ()), "ok"),
        rows=tuple(rows),
        title=f"Benchmarks on {gpu}",
    )


def _result_files(submission_id: int, gpu: str, result: Result) -> list[Block]:
    out: list[Block] = []
    prefix = f"submission-{submission_id}-{gpu}"
    for name, content in (("stdout.txt", result.stdout), ("stderr.txt", result.stderr),
                          ("compile.txt", result.compile_log)):
        if content.strip() and name not in result.files:
            out.append(File(f"{prefix}-{name}", content.encode(), f"{name} on {gpu}"))
    for name, content in result.files.items():
        out.append(File(f"{prefix}-{name}", content.encode(), f"{name} on {gpu}"))
    if result.tests and result.status is not Status.PASSED:
        lines = [f"{_ICON[t.passed]} {format_case(t.case)}: {t.message}" for t in result.tests]
        out.append(File(f"{prefix}-tests.txt", "\n".join(lines).encode(), f"every test on {gpu}"))
    return out
