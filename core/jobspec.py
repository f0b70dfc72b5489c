"""Turning a stored job into the harness's job spec: the one place that decides what a run sees.

The spec carries the ranked secret seed and a fresh result key, so it is built just before the
run and never stored.
"""

from __future__ import annotations

import json
import secrets

from sqlmodel import Session, select

from core.config import Settings
from core.models import FINAL_MODE, Code, Job, Leaderboard, LeaderboardFile, Submission
from core.tasks import submission_file_name, task_config
from core.timeouts import harness_limit
from harness.spec import GpuInfo, JobSpec, Mode


class JobSpecError(Exception):
    """The job's submission, code or leaderboard is gone or unreadable: it cannot run."""


def build_spec(session: Session, job: Job, settings: Settings) -> JobSpec:
    submission = session.get(Submission, job.submission_id)
    if submission is None:
        raise JobSpecError(f"submission {job.submission_id} no longer exists")
    code = session.get(Code, submission.code_sha256)
    if code is None:
        raise JobSpecError(f"the code of submission {submission.id} is missing")
    leaderboard = session.get(Leaderboard, submission.leaderboard_id)
    if leaderboard is None:
        raise JobSpecError(f"leaderboard {submission.leaderboard_id} no longer exists")
    try:
        task = json.loads(leaderboard.task_json)
        # A final-standings re-run is timed exactly as a ranked run (core.standings_final).
        mode = Mode.RANKED if submission.mode == FINAL_MODE else Mode(submission.mode)
        submission_name = submission_file_name(task)
        config = task_config(task)
    except (ValueError, KeyError, TypeError, StopIteration) as exc:
        raise JobSpecError(
            f"leaderboard {leaderboard.name!r} has an unreadable task: {exc!r}"
        ) from exc

    rows = session.exec(
        select(LeaderboardFile).where(LeaderboardFile.leaderboard_id == leaderboard.id)
    )
    files = {row.name: row.content for row in rows}
    files[submission_name] = code.content

    gpu = settings.gpus.get(job.gpu)
    return JobSpec(
        job_id=str(job.id),
        mode=mode,
        task=config,
        files=files,
        submission_name=submission_name,
        timeout_s=harness_limit(task, mode, settings.limits.default_timeout_s),
        device="cpu" if job.gpu == "cpu" else "cuda",
        gpu=GpuInfo(
            name=job.gpu,
            peak_bandwidth_gbps=gpu.peak_bandwidth_gbps if gpu else None,
            peak_tflops=gpu.peak_tflops if gpu else None,
        ),
        # Only ranked runs hide their cases; elsewhere the seed would only leak.
        secret_seed=leaderboard.secret_seed if mode is Mode.RANKED else None,
        result_key=secrets.token_hex(32),
    )
