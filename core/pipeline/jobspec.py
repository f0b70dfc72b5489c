"""Turning a stored job into the harness's job spec: the one place that decides what a run sees.

The spec carries the ranked secret seed and a fresh result key, so it is built just before the
run and never stored.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from kernelcup.core.leaderboards.tasks import submission_file_name, task_config
from kernelcup.core.pipeline.timeouts import harness_limit
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode

if TYPE_CHECKING:  # the database side; spec_for needs none (a GPU machine builds specs from folders)
    from sqlmodel import Session

    from kernelcup.core.config import Settings
    from kernelcup.core.store.models import Job


class JobSpecError(Exception):
    """The job's submission, code or leaderboard is gone or unreadable: it cannot run."""


def build_spec(session: Session, job: Job, settings: Settings) -> JobSpec:
    from sqlmodel import select

    from kernelcup.core.store.models import FINAL_MODE, Code, Leaderboard, LeaderboardFile, Submission, User

    submission = session.get(Submission, job.submission_id)
    if submission is None:
        raise JobSpecError(f"submission {job.submission_id} no longer exists")
    code = session.get(Code, submission.code_sha256)
    if code is None:
        raise JobSpecError(f"the code of submission {submission.id} is missing")
    leaderboard = session.get(Leaderboard, submission.leaderboard_id)
    if leaderboard is None:
        raise JobSpecError(f"leaderboard {submission.leaderboard_id} no longer exists")
    user = session.get(User, submission.user_id)
    if user is None:
        raise JobSpecError(f"the user of submission {submission.id} no longer exists")
    # Whose code runs in the harness besides the submission: the creator's (none: the operator's folder).
    creator = session.get(User, leaderboard.creator_id) if leaderboard.creator_id is not None else None
    rows = session.exec(
        select(LeaderboardFile).where(LeaderboardFile.leaderboard_id == leaderboard.id)
    )
    files = {row.name: row.content for row in rows}
    gpu = settings.gpus.get(job.gpu)
    try:
        task = json.loads(leaderboard.task_json)
        # A final-standings re-run is timed exactly as a ranked run (kernelcup.core.scheduling.standings_final).
        mode = Mode.RANKED if submission.mode == FINAL_MODE else Mode(submission.mode)
        return spec_for(
            task,
            files,
            code.content,
            mode,
            job_id=str(job.id),
            gpu=GpuInfo(
                name=job.gpu,
                peak_bandwidth_gbps=gpu.peak_bandwidth_gbps if gpu else None,
                peak_tflops=gpu.peak_tflops if gpu else None,
            ),
            device="cpu" if job.gpu == "cpu" else "cuda",
            secret_seed=leaderboard.secret_seed,
            default_timeout_s=settings.limits.default_timeout_s,
            leaderboard=f"{leaderboard.name} by {creator.identity if creator else 'the operator'}",
            user=user.identity,
        )
    except (ValueError, KeyError, TypeError, StopIteration) as exc:
        raise JobSpecError(
            f"leaderboard {leaderboard.name!r} has an unreadable task: {exc!r}"
        ) from exc


def spec_for(
    task: dict[str, Any],
    files: dict[str, str],
    code: str,
    mode: Mode,
    *,
    job_id: str,
    gpu: GpuInfo,
    device: str,
    secret_seed: int | None,
    default_timeout_s: float,
    leaderboard: str = "",
    user: str = "",
) -> JobSpec:
    """The harness's spec for ``code`` on a leaderboard (its parsed task.yml and files).

    ``secret_seed`` reaches the spec in ranked mode only: elsewhere it would only leak.
    ``leaderboard`` and ``user`` say whose earlier builds the job may reuse (JobSpec)."""
    submission_name = submission_file_name(task)
    return JobSpec(
        job_id=job_id,
        mode=mode,
        task=task_config(task, device),
        files={**files, submission_name: code},
        submission_name=submission_name,
        timeout_s=harness_limit(task, mode, default_timeout_s),
        device=device,
        gpu=gpu,
        secret_seed=secret_seed if mode is Mode.RANKED else None,
        result_key=secrets.token_hex(32),
        leaderboard=leaderboard,
        user=user,
    )
