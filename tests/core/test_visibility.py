"""The one rule of what a submission shows whom (kernelcup.core.access.visibility), on its own:
who gets everything, and what is left of a result for everyone else. Each surface's own test is
in tests/web/test_verdict_privacy.py (the real harness)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from kernelcup.core.access.visibility import EVERYTHING, PUBLIC, public_verdict, sight_of
from kernelcup.core.pipeline.events import JobEvent
from kernelcup.core.store.models import Leaderboard, Role, Submission
from kernelcup.harness.spec import CaseResult, Mode, Result, Status

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
SECRET = "SECRET-MARKER-123"


def board(deadline: datetime, task_json: str = "{}") -> Leaderboard:
    return Leaderboard(id=1, name="identity", deadline=deadline, task_json=task_json, secret_seed=1)


def submission() -> Submission:
    return Submission(id=7, leaderboard_id=1, user_id=1, code_sha256="c0de", file_name="k.py", mode="test")


@pytest.mark.parametrize(("user_id", "role", "expected"), [
    (1, Role.USER, EVERYTHING),  # the author
    (None, Role.ADMIN, EVERYTHING),
    (2, Role.USER, PUBLIC),  # another user
    (2, Role.CREATOR, PUBLIC),
    (None, Role.USER, PUBLIC),  # anyone
])
def test_before_the_deadline_only_the_author_and_admins_see_everything(user_id: int | None, role: Role,
                                                                       expected: object) -> None:
    assert sight_of(submission(), board(NOW + timedelta(days=1)), user_id=user_id, role=role, now=NOW) == expected


def test_after_the_deadline_everyone_sees_everything_unless_the_leaderboard_keeps_code_private() -> None:
    past = NOW - timedelta(seconds=1)
    assert sight_of(submission(), board(past), user_id=None, role=Role.USER, now=NOW) == EVERYTHING
    kept = board(past, '{"code_public_after_deadline": false}')
    assert sight_of(submission(), kept, user_id=None, role=Role.USER, now=NOW) == PUBLIC
    assert sight_of(submission(), board(past), user_id=None, role=Role.USER, now=NOW,
                    public_after_deadline=False) == PUBLIC


def result(status: Status, verdict: str, tests: list[CaseResult]) -> Result:
    return Result(job_id="1", mode=Mode.TEST, status=status, verdict=verdict, tests=tests, stdout=SECRET,
                  stderr=SECRET, compile_log=SECRET, files={"profile.txt": SECRET})


def test_others_get_the_status_and_which_case_failed_never_a_message_or_a_log() -> None:
    cases = [CaseResult({"size": 1}, True), CaseResult({"size": 2}, False, f"ValueError: {SECRET}"),
             CaseResult({"size": 3}, False, SECRET)]
    failed = result(Status.FAILED, f"test 2 of 3 failed: {SECRET}", cases)
    seen = PUBLIC.result(failed)
    assert SECRET not in repr(seen)
    assert seen.verdict == "failed: test 2 of 3"
    assert [(c.case, c.passed, c.message) for c in seen.tests] == [({"size": 1}, True, ""), ({"size": 2}, False, ""),
                                                                   ({"size": 3}, False, "")]
    assert EVERYTHING.result(failed) is failed


@pytest.mark.parametrize(("status", "tests", "expected"), [
    (Status.CRASHED, [], "crashed"),
    (Status.CRASHED, [CaseResult({"size": 1}, True), CaseResult({"size": 2}, True)], "crashed after 2 passing tests"),
    (Status.COMPILE_ERROR, [], "compile error"),
    (Status.TIMED_OUT, [CaseResult({"size": 1}, True)], "timed out after 1 passing test"),
    (Status.ERROR, [], "error"),
])
def test_a_public_verdict_is_made_of_public_facts(status: Status, tests: list[CaseResult], expected: str) -> None:
    assert public_verdict(result(status, f"the submission raised {SECRET}", tests)) == expected


def test_a_passing_verdict_is_public_as_the_harness_wrote_it() -> None:
    passed = result(Status.PASSED, "all 5 tests passed; ranked score 1.2 ms (geom of 4 benchmark medians)", [])
    assert public_verdict(passed) == passed.verdict


def test_a_jobs_error_text_is_the_authors() -> None:
    event = JobEvent(submission_id=7, job_id=1, gpu="cpu", phase="failed", finished=True, status="failed",
                     error=f"the harness exited with code 1 without a result; last lines of its stderr:\n{SECRET}")
    assert PUBLIC.event(event).error is None and PUBLIC.event(event).status == "failed"
    assert EVERYTHING.event(event) is event
    assert PUBLIC.job_error(event.error) is None and EVERYTHING.job_error(event.error) == event.error
