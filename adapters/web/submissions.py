"""Submissions and users, read for the API and the pages.

What of a submission a viewer is shown is the core's one rule,
``kernelcup.core.access.visibility.sight_of``: the author and admins (and everyone after the
deadline where the leaderboard allows) see code, verdict lines, messages and logs; others the
public facts. Synchronous reads: callers run them in a thread.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import quote

from fastapi.responses import JSONResponse
from sqlalchemy import ColumnElement, and_, or_
from sqlalchemy.orm import defer
from sqlmodel import Session, col, select

from kernelcup.adapters.web.auth import ApiError, Viewer
from kernelcup.adapters.web.logs import LogReads, logs_of
from kernelcup.adapters.web.replies import reply_response
from kernelcup.adapters.web.schemas import CaseOut, JobOut, SubmissionOut, SubmissionSummary, UserOut
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.core.access.permissions import allows
from kernelcup.core.access.visibility import PUBLIC, Sight, may_see_board, may_see_submission, sight_of
from kernelcup.core.app import Kernelcup
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.leaderboards.history import user_scores
from kernelcup.core.leaderboards.ranking import rank_of
from kernelcup.core.pipeline.events import job_event, job_state
from kernelcup.core.pipeline.report import format_seconds, submission_reply
from kernelcup.core.store.db import as_utc, session_scope
from kernelcup.core.store.models import FINAL_MODE, Code, Job, Leaderboard, Role, Run, Submission, User
from kernelcup.harness.spec import CaseResult, Mode

MAX_LIST = 100
_SYSTEM_SHOWN = ("device", "gpu", "driver", "torch", "cuda", "triton", "python", "sm_clock_mhz_before",
                 "sm_clock_mhz_after", "sm_clock_mhz_min", "sm_clock_mhz_max", "memory_clock_mhz_min",
                 "memory_clock_mhz_max", "gpu_temp_c_max", "power_w_max", "clock_limits",
                 "isolation")  # not the runner's hostname


def _not_found(submission_id: int) -> ApiError:
    return ApiError(404, f"There is no submission #{submission_id}.", "", "not_found")


def visible_submission(session: Session, viewer: Viewer, submission_id: int) -> tuple[Submission, Leaderboard]:
    submission = session.get(Submission, submission_id)
    board = session.get(Leaderboard, submission.leaderboard_id) if submission is not None else None
    if submission is None or board is None:
        raise _not_found(submission_id)
    if not may_see_submission(submission, board, user_id=viewer.user_id, role=viewer.role):
        raise _not_found(submission_id)
    return submission, board


def sight(app: Kernelcup, web: WebSettings, viewer: Viewer, submission: Submission, board: Leaderboard) -> Sight:
    return sight_of(submission, board, user_id=viewer.user_id, role=viewer.role, now=app.now(),
                    public_after_deadline=web.code_public_after_deadline)


def sight_of_submission(app: Kernelcup, web: WebSettings, viewer: Viewer, submission_id: int) -> Sight:
    """404 for a submission the viewer may not know of; else what they may see of it."""
    with session_scope(app.engine) as session:
        submission, board = visible_submission(session, viewer, submission_id)
        return sight(app, web, viewer, submission, board)


def submission_detail(app: Kernelcup, web: WebSettings, viewer: Viewer, reads: LogReads,
                      submission_id: int) -> SubmissionOut:
    """Each job's result, its logs cut to their first part (``whole_log`` has the rest)."""
    with session_scope(app.engine) as session:
        submission, board = visible_submission(session, viewer, submission_id)
        seen = sight(app, web, viewer, submission, board)
        jobs = [_job(session, job, board, seen, _Logs(reads, web, submission_id))
                for job in _jobs(session, submission_id)]
        base = _summary(session, web, submission, board, jobs)
        code = session.get(Code, submission.code_sha256) if seen.private else None
        return SubmissionOut(**base.model_dump(), jobs=jobs, code_visible=seen.private,
                             code=code.content if code is not None else None,
                             events_url=web.url(f"/api/submissions/{submission_id}/events"))


def whole_log(app: Kernelcup, web: WebSettings, viewer: Viewer, reads: LogReads, submission_id: int,
              gpu: str, name: str) -> bytes:
    """One log of the submission's run on ``gpu``, whole: for whoever may see the code (404 / 403
    as for the report)."""
    with session_scope(app.engine) as session:
        submission, board = visible_submission(session, viewer, submission_id)
        if not sight(app, web, viewer, submission, board).private:
            raise _private(submission_id)
        run = session.exec(
            select(Run.id, Run.created_at).join(Job, col(Job.id) == col(Run.job_id))
            .where(col(Job.submission_id) == submission_id, col(Job.gpu) == gpu).order_by(col(Run.id).desc())
        ).first()
        logs = None
        if run is not None and run[0] is not None:
            run_id, made = run[0], run[1]
            logs = reads.of_run((run_id, made), lambda: _result_json(session, run_id))
        body = logs.whole.get(name) if logs is not None else None
        if body is None:
            raise ApiError(404, f"Submission #{submission_id} has no log {name!r} on {gpu}.",
                           f"GET /api/submissions/{submission_id} links its logs.", "not_found")
        return body


def report_response(app: Kernelcup, web: WebSettings, viewer: Viewer, submission_id: int) -> JSONResponse:
    """The core's final report (what chat shows), logs whole, built as JSON here in the worker
    thread: megabytes of logs are never encoded on the event loop."""
    with session_scope(app.engine) as session:
        submission, board = visible_submission(session, viewer, submission_id)
        seen = sight(app, web, viewer, submission, board)
        if not seen.private:
            raise _private(submission_id)
        return reply_response(submission_reply(session, submission_id, seen))


def _private(submission_id: int) -> ApiError:
    return ApiError(403, f"The report of #{submission_id} is its author's until the deadline.",
                    "GET /api/submissions/{id} shows the verdict and timings.", "forbidden")


def _result_json(session: Session, run_id: int) -> str:
    return session.exec(select(Run.result_json).where(col(Run.id) == run_id)).one()


def list_submissions(app: Kernelcup, web: WebSettings, viewer: Viewer, *, user_id: int | None = None,
                     leaderboard: str | None = None, limit: int = 20, offset: int = 0) -> list[SubmissionSummary]:
    """Newest first; only on leaderboards the viewer may see (their own always)."""
    with session_scope(app.engine) as session:
        # Leaderboards are few: decide each one by the one rule, then filter submissions by id.
        boards = [b.id for b in session.exec(select(Leaderboard))
                  if may_see_board(b, user_id=viewer.user_id, role=viewer.role)]
        seen: ColumnElement[bool] = col(Submission.leaderboard_id).in_(boards)
        if not allows(viewer.role, Role.ADMIN):  # a withdrawn one: its author's and admins' (may_see_submission)
            seen = and_(seen, col(Submission.withdrawn_at).is_(None))
        if viewer.user_id is not None:
            seen = or_(seen, col(Submission.user_id) == viewer.user_id)
        query = (select(Submission, Leaderboard)
                 .join(Leaderboard, col(Leaderboard.id) == col(Submission.leaderboard_id))
                 .where(seen, col(Submission.mode) != FINAL_MODE))  # final re-runs are not entries
        if user_id is not None:
            query = query.where(col(Submission.user_id) == user_id)
        if leaderboard is not None:
            query = query.where(col(Leaderboard.name) == leaderboard)
        visible = session.exec(
            query.order_by(col(Submission.id).desc()).offset(max(0, offset)).limit(max(1, min(limit, MAX_LIST)))
        ).all()
        out = []
        for submission, board in visible:
            assert submission.id is not None
            jobs = [_job(session, job, board, PUBLIC) for job in _jobs(session, submission.id)]
            out.append(_summary(session, web, submission, board, jobs))
        return out


def user_detail(app: Kernelcup, web: WebSettings, viewer: Viewer, user_id: int, limit: int = 50) -> UserOut:
    with session_scope(app.engine) as session:
        user = session.get(User, user_id)
        if user is None:
            raise ApiError(404, f"There is no user #{user_id}.", "", "not_found")
        name = user.display_name
    return UserOut(id=user_id, name=name,
                   submissions=list_submissions(app, web, viewer, user_id=user_id, limit=limit))


def user_progress(app: Kernelcup, viewer: Viewer, user_id: int) -> dict[tuple[str, str], list[tuple[Any, float]]]:
    """The user's passing ranked runs per (leaderboard, GPU), oldest first: their progress."""
    with session_scope(app.engine) as session:
        out: dict[tuple[str, str], list[tuple[Any, float]]] = {}
        for one in user_scores(session, user_id):
            if may_see_board(one.leaderboard, user_id=viewer.user_id, role=viewer.role):
                out.setdefault((one.leaderboard.name, one.gpu), []).append((one.point.at, one.point.score))
        return out


def _jobs(session: Session, submission_id: int) -> list[Job]:
    return list(session.exec(select(Job).where(Job.submission_id == submission_id).order_by(col(Job.id))).all())


@dataclass(frozen=True)
class _Logs:
    """Where a submission's detail reads its runs' results, and links their whole logs."""

    reads: LogReads
    web: WebSettings
    submission_id: int

    def url(self, gpu: str, name: str) -> str:
        return self.web.url(f"/api/submissions/{self.submission_id}/logs/{quote(name)}?gpu={quote(gpu, safe='')}")


def _job(session: Session, job: Job, board: Leaderboard, seen: Sight, logs: _Logs | None = None) -> JobOut:
    """A job as the API shows it; with ``logs``, its run's result too (a list needs only the outcome)."""
    event = seen.event(job_event(session, job))
    out = JobOut(job_id=event.job_id, gpu=job.gpu, state=job_state(job.status) or job.status, phase=event.phase,
                 done=event.done,
                 total=event.total, queue_position=event.queue_position, finished=event.finished, error=event.error)
    # Not the stored result (megabytes of logs): that is read where it is needed, once.
    unread = defer(Run.result_json)  # type: ignore[arg-type]  # SQLModel types the column as its value
    run = session.exec(select(Run).options(unread).where(Run.job_id == job.id).order_by(col(Run.id).desc())).first()
    if run is None:
        return out
    out.passed, out.score_s = run.passed, run.score
    if run.passed and run.mode == Mode.RANKED.value and board.id is not None:
        out.rank = rank_of(session, board.id, job.gpu, run.user_id)
    if logs is None or run.id is None:
        return out
    run_id = run.id
    parsed = logs.reads.of_run((run_id, run.created_at), lambda: _result_json(session, run_id))
    if parsed is None:
        out.verdict = "unreadable result"
        return out
    result = seen.result(parsed.result)
    out.verdict = result.verdict
    out.tests = [_case(c) for c in result.tests]
    out.benchmarks = [_case(c) for c in result.benchmarks]
    system = asdict(result.system)
    out.system = {k: system[k] for k in _SYSTEM_SHOWN if system.get(k) not in (None, "", [])}
    if seen.private:
        out.logs = logs_of(result)
        out.log_urls = {name: logs.url(job.gpu, name) for name in parsed.whole}
    return out


def _case(case: CaseResult) -> CaseOut:
    def seconds(ns: float | None) -> float | None:
        return ns * 1e-9 if ns is not None else None

    return CaseOut(case=case.case, passed=case.passed, message=case.message, runs=case.runs,
                   median_s=seconds(case.median_ns), min_s=seconds(case.min_ns), ci_low_s=seconds(case.ci_low_ns),
                   ci_high_s=seconds(case.ci_high_ns), round_median_s=[v * 1e-9 for v in case.round_median_ns],
                   gbps=case.gbps, tflops=case.tflops,
                   percent_of_peak=case.percent_of_peak)


def _summary(session: Session, web: WebSettings, submission: Submission, board: Leaderboard,
             jobs: list[JobOut]) -> SubmissionSummary:
    assert submission.id is not None
    user = session.get(User, submission.user_id)
    finished = bool(jobs) and all(j.finished for j in jobs)
    passed = (all(j.passed for j in jobs) if finished else None) if jobs else None
    return SubmissionSummary(
        id=submission.id, leaderboard=board.name, user_id=submission.user_id,
        user_name=user.display_name if user is not None else "?", mode=submission.mode,
        file_name=shown_file_name(submission.file_name),
        created_at=as_utc(submission.created_at), finished=finished, passed=passed,
        outcome=("withdrawn; " if submission.withdrawn_at is not None else "")
        + "; ".join(f"{j.gpu}: {outcome(j)}" for j in jobs), url=web.url(f"/submissions/{submission.id}"),
    )


def outcome(job: JobOut) -> str:
    if job.passed is True:
        return f"passed {format_seconds(job.score_s)}" if job.score_s is not None else "passed"
    if job.passed is False:
        return "failed"
    if job.finished:
        return job.state.replace("_", " ")
    if job.phase == "queued" and job.queue_position is not None:
        return f"queued, position {job.queue_position}"
    return f"{job.phase} {job.done}/{job.total}" if job.total else job.phase
