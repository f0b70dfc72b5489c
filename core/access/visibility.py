"""Who may see what: a hidden leaderboard, and what part of a submission a viewer is shown.

One place, so the chat commands, the web pages and API, the live event streams and the final
standings cannot drift apart. The rule for a submission (SECURITY.md, *What a submission shows
whom*):

- **public facts**, for anyone who may see its leaderboard: the status of each job and run, the
  leaderboard, GPU, mode, file name, times and score (and rank) of a run, which test or
  benchmark case failed, and a passing run's verdict line (the harness makes it of counts and
  timings);
- **private details**, for its author and admins only (and for everyone after the deadline where
  the leaderboard makes code public then): the code, and everything that can echo it: the
  verdict line of a run that did not pass and each case's message (an exception's text, a
  compiler's error, a wrong value), stdout, stderr, compile output, profiles, and a job's error
  text (a runner's words, which can quote the harness's output).

``sight_of`` decides; the ``Sight`` it returns cuts a result, a job event or a job error down to
what that viewer may see. Every surface goes through it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlmodel import Session, select

from kernelcup.core.access.membership import PRIVATE, is_member
from kernelcup.core.access.permissions import allows
from kernelcup.core.config import Settings
from kernelcup.core.leaderboards.catalog import missing_leaderboard, task_of
from kernelcup.core.pipeline.events import JobEvent
from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import Leaderboard, Role, Submission
from kernelcup.harness.spec import CaseResult, Result, Status

# task.yml may say whether its code becomes public after the deadline; this key overrides the
# default an adapter passes (kernelcup's own extension of GPU MODE's format).
CODE_PUBLIC_KEY = "code_public_after_deadline"


def may_see_board(board: Leaderboard, *, user_id: int | None, role: Role) -> bool:
    """Public leaderboards for everyone; a hidden one for its creator and admins; a private one
    for them and its members (kernelcup.core.access.membership), who alone may also enter it."""
    if board.visibility == "public" or allows(role, Role.ADMIN) or (
        user_id is not None and board.creator_id == user_id
    ):
        return True
    return board.visibility == PRIVATE and user_id is not None and is_member(board, user_id)


def visible_leaderboard(session: Session, name: str, *, user_id: int | None, role: Role) -> Leaderboard:
    """The leaderboard ``name`` where this viewer may see it; else the very refusal a name that
    names no leaderboard gets (kernelcup.core.errors.NotFound), so that a hidden leaderboard's
    answer is never an oracle of its existence."""
    board = session.exec(select(Leaderboard).where(Leaderboard.name == name)).first()
    if board is not None and may_see_board(board, user_id=user_id, role=role):
        return board
    raise missing_leaderboard(session, name)


def may_see_submission(submission: Submission, board: Leaderboard, *, user_id: int | None, role: Role) -> bool:
    """Whether this viewer may know of the submission at all: its author always; admins always;
    anyone else where they may see its leaderboard and it was not withdrawn."""
    if (user_id is not None and submission.user_id == user_id) or allows(role, Role.ADMIN):
        return True
    return submission.withdrawn_at is None and may_see_board(board, user_id=user_id, role=role)


def default_code_public(settings: Settings) -> bool:
    """The operator's default for leaderboards whose task.yml says nothing (``web:`` section,
    ``code_public_after_deadline``): the same for chat commands and the web."""
    value = (settings.sections.get("web") or {}).get(CODE_PUBLIC_KEY, True)
    return value if isinstance(value, bool) else str(value).strip().lower() not in ("0", "false", "no", "off")


def code_public_after_deadline(board: Leaderboard, default: bool = True) -> bool:
    value = task_of(board).get(CODE_PUBLIC_KEY)
    return default if value is None else bool(value)


@dataclass(frozen=True)
class Sight:
    """What one viewer may see of one submission: everything (``private``), or its public facts."""

    private: bool

    def verdict(self, result: Result) -> str:
        return result.verdict if self.private else public_verdict(result)

    def result(self, result: Result) -> Result:
        """``result`` with only what this viewer may see: for others, the verdict rebuilt from the
        status and the cases, every case's message, the logs, compile output and files gone."""
        if self.private:
            return result
        return replace(result, verdict=public_verdict(result), compile_log="", stdout="", stderr="", files={},
                       tests=[replace(case, message="") for case in result.tests],
                       benchmarks=[replace(case, message="") for case in result.benchmarks])

    def job_error(self, error: str | None) -> str | None:
        """Why a job has no result (a runner's message, which may quote the harness's output):
        ``None`` for others, who are told its status."""
        return error if self.private else None

    def event(self, event: JobEvent) -> JobEvent:
        return event if self.private or event.error is None else replace(event, error=None)


EVERYTHING = Sight(private=True)  # the author's own answer to their own submission
PUBLIC = Sight(private=False)  # anyone: announcements, the final standings, lists of submissions


def sight_of(
    submission: Submission,
    board: Leaderboard,
    *,
    user_id: int | None,
    role: Role,
    now: datetime,
    public_after_deadline: bool = True,
) -> Sight:
    """The one rule: the author and admins see everything; everyone else the public facts, and
    after the deadline everything where the leaderboard (or the operator's default) makes code
    public then. Whether the viewer may see the submission at all is ``may_see_board``'s."""
    if (user_id is not None and submission.user_id == user_id) or allows(role, Role.ADMIN):
        return EVERYTHING
    if as_utc(board.deadline) <= now and code_public_after_deadline(board, public_after_deadline):
        return EVERYTHING
    return PUBLIC


def status_words(status: str) -> str:
    """A job's or a run's status as words: ``timed_out`` -> "timed out"."""
    return status.replace("_", " ")


def public_verdict(result: Result) -> str:
    """A run's verdict from public facts only. A passing run's line is the harness's own (it is
    made of counts and timings: "all 5 tests passed; ranked score 1.2 ms ..."); any other run's
    line can quote what the code raised, printed or failed to compile, so it is rebuilt from the
    status and which case failed: "failed: test 3 of 5", "crashed after 2 passing tests"."""
    if result.status is Status.PASSED:
        return result.verdict
    tests = result.tests
    words = status_words(result.status.value)
    where = _first_failure("test", tests) or _first_failure("benchmark", result.benchmarks)
    if where:
        return f"{words}: {where}"
    if tests and all(case.passed for case in tests):
        return f"{words} after {len(tests)} passing test{'s' if len(tests) > 1 else ''}"
    return words


def _first_failure(kind: str, cases: list[CaseResult]) -> str:
    failed = next((index for index, case in enumerate(cases) if not case.passed), None)
    return "" if failed is None else f"{kind} {failed + 1} of {len(cases)}"
