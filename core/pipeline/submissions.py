"""Accepting a submission: every check first, then the submission and its jobs in one transaction.

Nothing is half-written: a refused submission leaves no row behind.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session, col, select

from kernelcup.core.access.permissions import allows
from kernelcup.core.access.ratelimits import check as check_rate_limit
from kernelcup.core.access.users import user_for
from kernelcup.core.access.visibility import may_see_board, visible_leaderboard
from kernelcup.core.config import Settings
from kernelcup.core.errors import Forbidden, Refused, TooLarge, UserError
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.leaderboards.catalog import cuda_words, declared_gpus, runnable_gpus, task_of
from kernelcup.core.leaderboards.devices import CPU, cuda_refusal
from kernelcup.core.leaderboards.tasks import accepted_extensions
from kernelcup.core.messages import Actor
from kernelcup.core.pipeline.fairness import assign_turns
from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import Code, Job, Leaderboard, Role, Submission
from kernelcup.core.store.switches import submissions_paused
from kernelcup.harness.spec import Mode

_POPCORN = re.compile(r"^\s*(?:#|//)!POPCORN\s+(\w+)\s+(.*?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class SubmissionFile:
    name: str
    content: bytes


@dataclass(frozen=True)
class Directives:
    leaderboard: str | None
    gpus: tuple[str, ...]


class NeedsChoice(UserError):
    """A value is missing that an adapter may ask for: a menu of ``options`` for ``param``."""

    def __init__(self, param: str, options: list[str], message: str, hint: str) -> None:
        super().__init__(message, hint)
        self.param = param
        self.options = options


class NeedsGpuChoice(NeedsChoice):
    """Several GPUs fit and none was named."""

    def __init__(self, board: str, options: list[str]) -> None:
        super().__init__("gpu", options, f"Leaderboard {board} runs on {', '.join(options)}: which GPU(s)?",
                         "Name one or more with the gpu option (or a `#!POPCORN gpus ...` line).")


class NeedsLeaderboardChoice(NeedsChoice):
    """No leaderboard was named, by option or ``#!POPCORN`` line."""

    def __init__(self, options: list[str]) -> None:
        super().__init__("leaderboard", options, "Which leaderboard is this for?",
                         "Name it with the leaderboard option or a `#!POPCORN leaderboard NAME` line.")


def read_directives(source: str) -> Directives:
    """``#!POPCORN leaderboard NAME`` and ``#!POPCORN gpus H100 A100`` lines (GPU MODE's)."""
    board: str | None = None
    gpus: list[str] = []
    for key, value in _POPCORN.findall(source):
        if key == "leaderboard" and value:
            board = value.split()[0]
        elif key in ("gpu", "gpus"):
            gpus.extend(g for g in re.split(r"[\s,]+", value) if g)
    return Directives(board, tuple(gpus))


def decode_source(file: SubmissionFile, max_bytes: int) -> str:
    name = shown_file_name(file.name)
    if not file.content.strip():
        raise UserError(f"{name} is empty.", "Attach the file that defines custom_kernel.")
    if len(file.content) > max_bytes:
        raise TooLarge(
            f"{name} is {len(file.content) / 1024:.0f} KiB; the limit is {max_bytes // 1024} KiB.",
            "Submit the kernel source only, without data or binaries.",
        )
    try:
        return file.content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{name} is not UTF-8 text (byte {exc.start} is invalid).",
            "Save the file as UTF-8 source code.",
        ) from exc


def submit(
    session: Session,
    settings: Settings,
    *,
    actor: Actor,
    role: Role,
    file: SubmissionFile,
    mode: Mode,
    leaderboard: str | None,
    gpus: list[str],
    served_gpus: set[str],
    now: datetime,
    reply_to: str | None = None,
) -> tuple[Submission, list[Job]]:
    source = decode_source(file, settings.limits.max_file_bytes)
    directives = read_directives(source)
    name = leaderboard or directives.leaderboard
    user = user_for(session, actor)
    if not name:
        raise NeedsLeaderboardChoice(_boards_for(session, file.name, user.id, role))
    if user.banned:
        raise Forbidden("You are banned from submitting.", "Ask an admin if you think this is a mistake.")
    if submissions_paused(session) and not allows(role, Role.ADMIN):
        raise Refused("Submissions are paused right now.", "Try again later; nothing was queued.")
    board = visible_leaderboard(session, name, user_id=user.id, role=role)  # a hidden one answers as a missing one
    _check_file_type(board, file.name)
    if mode is Mode.RANKED and as_utc(board.deadline) <= now:
        raise Refused(
            f"Leaderboard {board.name} closed at {as_utc(board.deadline):%Y-%m-%d %H:%M} UTC.",
            "Ranked submissions are no longer accepted; test and benchmark still work.",
        )
    chosen = _choose_gpus(session, board, gpus or list(directives.gpus), served_gpus)
    assert user.id is not None and board.id is not None
    # The default limit (limits.submissions_per_hour) holds for everyone but admins.
    default_limit = 0 if allows(role, Role.ADMIN) else settings.limits.submissions_per_hour
    check_rate_limit(session, user.id, board.id, mode.value, now, default_per_hour=default_limit)

    sha = hashlib.sha256(file.content).hexdigest()
    if session.get(Code, sha) is None:
        session.add(Code(sha256=sha, content=source))
    submission = Submission(
        leaderboard_id=board.id,
        user_id=user.id,
        code_sha256=sha,
        file_name=shown_file_name(file.name),  # the uploader's words: never a path or a bidi trick
        mode=mode.value,
        reply_to=reply_to,
        created_at=now,
    )
    session.add(submission)
    session.flush()
    assert submission.id is not None
    jobs = [
        Job(submission_id=submission.id, gpu=gpu, runner=settings.gpus[gpu].runner, queued_at=now)
        for gpu in chosen
    ]
    assign_turns(session, user.id, jobs)
    session.add_all(jobs)
    session.flush()
    return submission, jobs


def _boards_for(session: Session, file_name: str, user_id: int | None, role: Role) -> list[str]:
    """The leaderboards this asker sees that take a file of this type, by name."""
    boards = session.exec(select(Leaderboard).order_by(col(Leaderboard.name))).all()
    return [b.name for b in boards if may_see_board(b, user_id=user_id, role=role)
            and file_name.endswith(accepted_extensions(task_of(b)))]


def _check_file_type(board: Leaderboard, file_name: str) -> None:
    allowed = accepted_extensions(task_of(board))
    if not file_name.endswith(allowed):
        raise UserError(
            f"{shown_file_name(file_name)} is not a {' or '.join(allowed)} file, which {board.name} expects.",
            f"Get a starting point with `template {board.name}`.",
        )


def _choose_gpus(session: Session, board: Leaderboard, asked: list[str], served: set[str]) -> list[str]:
    assert board.id is not None
    accepted = runnable_gpus(session, board)
    if board.needs_cuda:
        _refuse_where_cuda_cannot_run(board, accepted, asked, served)
    by_lower = {g.lower(): g for g in accepted}
    chosen: list[str] = []
    for gpu in asked:
        match = by_lower.get(gpu.lower())
        if match is None:
            raise UserError(
                f"Leaderboard {board.name} does not run on {gpu}.",
                f"It runs on: {', '.join(accepted)}.",
            )
        if match not in chosen:
            chosen.append(match)
    if not chosen:
        available = [g for g in accepted if g in served]
        if len(available) == 1:
            return available
        if not available:
            raise Refused(
                f"No runner serves {board.name}'s GPUs ({', '.join(accepted)}) right now.",
                "An admin can check the runners in the config.",
            )
        raise NeedsGpuChoice(board.name, available)
    missing = [g for g in chosen if g not in served]
    if missing:
        raise Refused(
            f"No runner serves {', '.join(missing)} right now.",
            f"Available now: {', '.join(g for g in accepted if g in served) or 'none'}.",
        )
    return chosen


def _refuse_where_cuda_cannot_run(board: Leaderboard, accepted: list[str], asked: list[str], served: set[str]) -> None:
    """A leaderboard that needs CUDA, asked for the CPU or with no GPU served here that runs it, is
    refused in one line naming where it runs, before any job exists."""
    here = [g for g in accepted if g in served]
    if here and not any(g.lower() == CPU for g in asked):
        return
    raise Refused(cuda_refusal(board.name, here, declared_gpus(board), cuda_words(board) or "CUDA"))
