"""``withdraw``: an author takes their own submission out of the rankings; an admin anyone's, with
a reason that is logged and stored. Afterwards only the author and admins know of it."""

from __future__ import annotations

from sqlmodel import Session
from structlog.testing import capture_logs

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Reply, Table
from kernelcup.core.store.models import Submission
from tests.core.conftest import ALICE, BOB, InstantRunner, finish, request, solution

CAROL = Actor("slack:T1/U3", "carol")


async def _ranked(app: Kernelcup, runner: InstantRunner, actor: Actor, score: float) -> int:
    runner.score_s = score
    reply = await app.handle(request("submit", actor, files={"k.py": solution("vectoradd")}, mode="ranked"))
    assert reply.submission_id is not None, reply.text()
    await finish(app, reply.submission_id)
    return reply.submission_id


def _rows(reply: Reply) -> list[tuple[str, ...]]:
    return [row for block in reply.blocks if isinstance(block, Table) for row in block.rows]


async def test_an_author_withdraws_their_best_run_and_their_next_best_ranks(app: Kernelcup,
                                                                           runner: InstantRunner) -> None:
    best = await _ranked(app, runner, BOB, 1e-3)
    await _ranked(app, runner, BOB, 3e-3)
    await _ranked(app, runner, CAROL, 2e-3)
    reply = await app.handle(request("withdraw", BOB, id=best))
    assert reply.ok, reply.text()
    show = await app.handle(request("show", CAROL, leaderboard="vectoradd"))
    assert [(r[0], r[1], r[2]) for r in _rows(show)] == [("1", "carol", "2 ms"), ("2", "bob", "3 ms")]
    mine = await app.handle(request("mine", BOB))
    assert next(r for r in _rows(mine) if r[0] == f"#{best}")[5].startswith("withdrawn; ")


async def test_someone_else_cannot_withdraw_a_submission(app: Kernelcup, runner: InstantRunner) -> None:
    theirs = await _ranked(app, runner, BOB, 1e-3)
    reply = await app.handle(request("withdraw", CAROL, id=theirs))
    assert not reply.ok and "only withdraw your own" in reply.text()
    show = await app.handle(request("show", CAROL, leaderboard="vectoradd"))
    assert [r[1] for r in _rows(show)] == ["bob"]


async def test_an_admin_withdraws_anyones_with_a_reason_that_is_logged_and_stored(
        app: Kernelcup, runner: InstantRunner) -> None:
    theirs = await _ranked(app, runner, BOB, 1e-3)
    refused = await app.handle(request("withdraw", ALICE, id=theirs))
    assert not refused.ok and "Give a reason" in refused.text()
    with capture_logs() as logs:
        reply = await app.handle(request("withdraw", ALICE, id=theirs, reason="same code as #1 of another user"))
    assert reply.ok, reply.text()
    logged = [e for e in logs if e["event"] == "submission withdrawn"]
    assert logged and logged[0]["reason"] == "same code as #1 of another user" and logged[0]["by"] == ALICE.identity
    with Session(app.engine) as session:
        row = session.get(Submission, theirs)
        assert row is not None and row.withdrawn_reason == "same code as #1 of another user"
    shown = await app.handle(request("get-submission", BOB, id=theirs))  # the author sees who and why
    assert "Withdrawn by alice (admin)" in shown.text() and "same code as #1" in shown.text()
    show = await app.handle(request("show", BOB, leaderboard="vectoradd"))
    assert _rows(show) == []


async def test_others_are_told_a_withdrawn_submission_does_not_exist(app: Kernelcup, runner: InstantRunner) -> None:
    mine = await _ranked(app, runner, BOB, 1e-3)
    assert (await app.handle(request("withdraw", BOB, id=mine))).ok
    withdrawn = await app.handle(request("get-submission", CAROL, id=mine))
    missing = await app.handle(request("get-submission", CAROL, id=mine + 1000))
    assert withdrawn.text() == missing.text().replace(str(mine + 1000), str(mine))
    again = await app.handle(request("withdraw", CAROL, id=mine))
    assert "There is no submission" in again.text()
    assert (await app.handle(request("get-submission", ALICE, id=mine))).ok  # admins still see it


async def test_a_submission_is_withdrawn_once(app: Kernelcup, runner: InstantRunner) -> None:
    mine = await _ranked(app, runner, BOB, 1e-3)
    assert (await app.handle(request("withdraw", BOB, id=mine))).ok
    again = await app.handle(request("withdraw", BOB, id=mine))
    assert not again.ok and "already withdrawn" in again.text()
