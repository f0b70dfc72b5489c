"""record_run keeps each user's best ranked run; standings and rank_of rank those bests."""

from __future__ import annotations

import random

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.leaderboards.ranking import (
    RankChange,
    competition_ranks,
    entry_counts,
    rank_of,
    rebuild_best,
    standings,
)
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import BestScore, User

from .scenario import Scenario


def _ranking(engine: Engine, board: int, gpu: str = "H100") -> list[tuple[int, int, float]]:
    with Session(engine) as session:
        return [(s.rank, s.user_id, s.score) for s in standings(session, board, gpu)]


def test_the_first_entry_leads_an_empty_board(scenario: Scenario) -> None:
    board, alice = scenario.leaderboard(), scenario.user("alice")
    change = scenario.ranked(board, alice, 2.0)
    assert change == RankChange(
        old_rank=None, new_rank=1, previous_leader_user_id=None, is_new_leader=True
    )


def test_a_newcomer_behind_the_leader_is_not_a_new_leader(scenario: Scenario) -> None:
    board, alice, bob = scenario.leaderboard(), scenario.user("alice"), scenario.user("bob")
    scenario.ranked(board, alice, 1.0)
    assert scenario.ranked(board, bob, 2.0) == RankChange(None, 2, alice, False)


def test_an_improvement_that_takes_the_lead_reports_old_and_new_rank(scenario: Scenario) -> None:
    board, alice, bob = scenario.leaderboard(), scenario.user("alice"), scenario.user("bob")
    scenario.ranked(board, alice, 1.0)
    scenario.ranked(board, bob, 2.0)
    assert scenario.ranked(board, bob, 0.5) == RankChange(2, 1, alice, True)
    assert _ranking(scenario.engine, board) == [(1, bob, 0.5), (2, alice, 1.0)]


def test_the_leader_improving_is_not_a_new_leader(scenario: Scenario) -> None:
    board, alice = scenario.leaderboard(), scenario.user("alice")
    scenario.ranked(board, alice, 1.0)
    assert scenario.ranked(board, alice, 0.9) == RankChange(1, 1, alice, False)


def test_a_worse_score_changes_nothing(scenario: Scenario) -> None:
    board, alice = scenario.leaderboard(), scenario.user("alice")
    scenario.ranked(board, alice, 1.0)
    before = scenario.entries(board)
    assert scenario.ranked(board, alice, 1.5) is None
    assert scenario.entries(board) == before


@pytest.mark.parametrize(
    ("passed", "mode", "score"),
    [(False, "ranked", 0.1), (True, "benchmark", 0.1), (True, "test", 0.1), (True, "ranked", None)],
    ids=["failed", "benchmark", "test", "no-score"],
)
def test_only_passing_ranked_runs_with_a_score_count(
    scenario: Scenario, passed: bool, mode: str, score: float | None
) -> None:
    board, alice = scenario.leaderboard(), scenario.user("alice")
    scenario.ranked(board, alice, 1.0)
    assert scenario.ranked(board, alice, score, passed=passed, mode=mode) is None
    assert [entry[5] for entry in scenario.entries(board)] == [1.0]


def test_equal_scores_rank_the_earlier_submission_first(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    alice, bob, carol = scenario.user("alice"), scenario.user("bob"), scenario.user("carol")
    scenario.ranked(board, bob, 1.0)
    scenario.ranked(board, alice, 1.0)
    scenario.ranked(board, carol, 0.5)
    assert _ranking(scenario.engine, board) == [(1, carol, 0.5), (2, bob, 1.0), (3, alice, 1.0)]
    with Session(scenario.engine) as session:
        assert rank_of(session, board, "H100", alice) == 3


def test_an_equal_score_from_a_later_submission_keeps_the_earlier(scenario: Scenario) -> None:
    board, alice = scenario.leaderboard(), scenario.user("alice")
    first = scenario.submit(board, alice)
    scenario.finish(first, 1.0)
    assert scenario.ranked(board, alice, 1.0) is None
    assert [entry[4] for entry in scenario.entries(board)] == [first]


def test_an_earlier_submission_finishing_late_with_an_equal_score_wins_the_tie(
    scenario: Scenario,
) -> None:
    board, alice, bob = scenario.leaderboard(), scenario.user("alice"), scenario.user("bob")
    early = scenario.submit(board, alice)  # queued first, finishes last
    scenario.ranked(board, bob, 1.0)
    scenario.ranked(board, alice, 1.0)
    assert scenario.finish(early, 1.0) == RankChange(2, 1, bob, True)


def test_banned_users_are_left_out_and_ranks_stay_dense(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    alice, mallory = scenario.user("alice"), scenario.user("mallory", banned=True)
    bob = scenario.user("bob")
    scenario.ranked(board, alice, 1.0)
    assert scenario.ranked(board, mallory, 0.1) is None
    scenario.ranked(board, bob, 2.0)
    assert _ranking(scenario.engine, board) == [(1, alice, 1.0), (2, bob, 2.0)]
    with Session(scenario.engine) as session:
        assert rank_of(session, board, "H100", mallory) is None
        assert rank_of(session, board, "H100", bob) == 2
        assert entry_counts(session, [board]) == {board: 2}


def test_unbanning_restores_the_entry(scenario: Scenario) -> None:
    board, mallory = scenario.leaderboard(), scenario.user("mallory", banned=True)
    scenario.ranked(board, mallory, 0.1)
    with session_scope(scenario.engine) as session:
        user = session.get(User, mallory)
        assert user is not None
        user.banned = False
    assert _ranking(scenario.engine, board) == [(1, mallory, 0.1)]


def test_gpus_are_ranked_separately(scenario: Scenario) -> None:
    board = scenario.leaderboard(gpus=("H100", "A100"))
    alice, bob = scenario.user("alice"), scenario.user("bob")
    scenario.ranked(board, alice, 1.0, gpu="H100")
    scenario.ranked(board, bob, 2.0, gpu="H100")
    assert scenario.ranked(board, bob, 3.0, gpu="A100") == RankChange(None, 1, None, True)
    assert _ranking(scenario.engine, board, "A100") == [(1, bob, 3.0)]
    with Session(scenario.engine) as session:
        assert entry_counts(session, [board, board + 1]) == {board: 3, board + 1: 0}


def test_pages_continue_the_ranks_and_rank_of_agrees(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    users = [scenario.user(f"user{i}") for i in range(12)]
    scores = random.Random(7).sample(range(100), len(users))
    for user, score in zip(users, scores, strict=True):
        scenario.ranked(board, user, score / 10)
    with Session(scenario.engine) as session:
        pages = [standings(session, board, "H100", limit=5, offset=o) for o in (0, 5, 10)]
        flat = [s for page in pages for s in page]
        assert [s.rank for s in flat] == list(range(1, 13))
        assert [s.score for s in flat] == sorted(s / 10 for s in scores)
        assert all(rank_of(session, board, "H100", s.user_id) == s.rank for s in flat)
        assert flat[0].user_name == f"user{users.index(flat[0].user_id)}"
        assert flat[0].submitted_at.tzinfo is not None


def test_rebuilding_from_the_runs_gives_the_same_index(scenario: Scenario) -> None:
    board = scenario.leaderboard(gpus=("H100", "A100"))
    users = [scenario.user(f"user{i}") for i in range(15)]
    rng = random.Random(3)
    pending = []
    for _ in range(150):
        pending.append((scenario.submit(board, rng.choice(users), rng.choice(["ranked"] * 4
                        + ["benchmark"])), rng.choice(["H100", "A100"])))
    rng.shuffle(pending)  # runs finish in any order
    for submission, gpu in pending:
        # Coarse scores make ties common, so the tie rules are exercised too.
        scenario.finish(submission, rng.randint(1, 8) / 4, gpu, passed=rng.random() > 0.2)
    incremental = scenario.entries(board)
    with session_scope(scenario.engine) as session:
        assert rebuild_best(session, board) == len(incremental)
    assert scenario.entries(board) == incremental
    assert len(incremental) > 20


def test_rebuild_leaves_other_leaderboards_alone(scenario: Scenario) -> None:
    one, two = scenario.leaderboard("one"), scenario.leaderboard("two")
    alice = scenario.user("alice")
    scenario.ranked(one, alice, 1.0)
    scenario.ranked(two, alice, 2.0)
    with session_scope(scenario.engine) as session:
        session.delete(session.exec(select(BestScore).where(BestScore.leaderboard_id == two)).one())
        rebuild_best(session, one)
    assert len(scenario.entries(one)) == 1
    assert scenario.entries(two) == []


def test_ties_within_noise_follow_the_group_leader_not_the_neighbour() -> None:
    # b reaches a's range (tied with a); c reaches b's but not a's: c starts a new group.
    ranges = [(0.99, 1.01), (1.00, 1.02), (1.015, 1.03), None]
    assert competition_ranks(ranges) == [(1, True), (1, True), (3, False), (4, False)]
    assert competition_ranks(ranges, first=21)[2] == (23, False)


def test_an_entry_keeps_its_runs_noise_range_and_a_rebuild_agrees(scenario: Scenario) -> None:
    board, alice = scenario.leaderboard(), scenario.user("alice")
    scenario.ranked(board, alice, 2.0, noise=(1.9, 2.1))
    scenario.ranked(board, alice, 1.0, noise=(0.95, 1.05))
    with Session(scenario.engine) as session:
        [entry] = standings(session, board, "H100")
    assert (entry.score, entry.score_low, entry.score_high) == (1.0, 0.95, 1.05)
    with session_scope(scenario.engine) as session:
        rebuild_best(session, board)
    with Session(scenario.engine) as session:
        [rebuilt] = standings(session, board, "H100")
    assert rebuilt == entry
