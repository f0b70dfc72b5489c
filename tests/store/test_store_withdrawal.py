"""Withdrawing a submission (kernelcup.core.pipeline.withdrawal): its runs leave the ranking and the
final standings, the author's next best run takes the entry, and the row stays."""

from __future__ import annotations

import random

from sqlmodel import Session, select

from kernelcup.core.leaderboards.ranking import rebuild_best, standings
from kernelcup.core.pipeline.withdrawal import withdraw
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import FinalStanding, Submission, User

from .scenario import START, Scenario


def _withdraw(scenario: Scenario, submission_id: int, by: int, reason: str | None = None) -> bool:
    with session_scope(scenario.engine) as session:
        submission = session.get(Submission, submission_id)
        user = session.get(User, by)
        assert submission is not None and user is not None
        return withdraw(session, submission, by=user, reason=reason, now=START).left_final_standings


def _ranking(scenario: Scenario, board: int) -> list[tuple[int, int, float]]:
    with Session(scenario.engine) as session:
        return [(s.rank, s.user_id, s.score) for s in standings(session, board, "H100")]


def test_withdrawing_the_best_run_gives_the_entry_to_the_next_best(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    ann, bea = scenario.user("ann"), scenario.user("bea")
    best = scenario.submit(board, ann)
    scenario.finish(best, 1.0)
    scenario.ranked(board, ann, 3.0)
    scenario.ranked(board, bea, 2.0)
    _withdraw(scenario, best, ann)
    assert _ranking(scenario, board) == [(1, bea, 2.0), (2, ann, 3.0)]
    with session_scope(scenario.engine) as session:
        kept = session.get(Submission, best)
        assert kept is not None and kept.withdrawn_at is not None and kept.withdrawn_by_id == ann  # kept for audit


def test_withdrawing_ones_only_run_leaves_the_ranking(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    ann, bea = scenario.user("ann"), scenario.user("bea")
    only = scenario.submit(board, ann)
    scenario.finish(only, 1.0)
    scenario.ranked(board, bea, 2.0)
    _withdraw(scenario, only, ann)
    assert _ranking(scenario, board) == [(1, bea, 2.0)]


def test_a_run_that_finishes_after_the_withdrawal_never_ranks(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    ann = scenario.user("ann")
    late = scenario.submit(board, ann)
    _withdraw(scenario, late, ann)
    assert scenario.finish(late, 1.0) is None
    assert scenario.entries(board) == []


def test_the_index_after_withdrawals_is_what_a_rebuild_computes(scenario: Scenario) -> None:
    board = scenario.leaderboard(gpus=("H100", "A100"))
    users = [scenario.user(f"user{i}") for i in range(8)]
    rng = random.Random(5)
    submissions = []
    for _ in range(80):
        submission = scenario.submit(board, rng.choice(users))
        scenario.finish(submission, rng.randint(1, 8) / 4, rng.choice(["H100", "A100"]))
        submissions.append(submission)
    with session_scope(scenario.engine) as session:
        authors = {s.id: s.user_id for s in session.exec(select(Submission)).all()}
    withdrawn = rng.sample(submissions, 25)
    for submission in withdrawn:
        _withdraw(scenario, submission, authors[submission])
    incremental = scenario.entries(board)
    assert not {entry[4] for entry in incremental} & set(withdrawn)
    with session_scope(scenario.engine) as session:
        assert rebuild_best(session, board) == len(incremental)
    assert scenario.entries(board) == incremental


def test_a_withdrawn_entry_leaves_the_final_standings_and_those_below_move_up(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    ann, bea, cid = scenario.user("ann"), scenario.user("bea"), scenario.user("cid")
    entries = {user: scenario.submit(board, user) for user in (ann, bea, cid)}
    with session_scope(scenario.engine) as session:
        for rank, user in enumerate((ann, bea, cid), start=1):
            session.add(FinalStanding(leaderboard_id=board, gpu="H100", rank=rank, user_id=user,
                                      submission_id=entries[user], score=float(rank), rank_before=rank))
    admin = scenario.user("root")
    assert _withdraw(scenario, entries[ann], admin, "copied from a public repository")
    with Session(scenario.engine) as session:
        rows = session.exec(select(FinalStanding).order_by(FinalStanding.rank)).all()  # type: ignore[arg-type]
        assert [(r.rank, r.user_id) for r in rows] == [(1, bea), (2, cid)]
        kept = session.get(Submission, entries[ann])
        assert kept is not None and kept.withdrawn_reason == "copied from a public repository"
