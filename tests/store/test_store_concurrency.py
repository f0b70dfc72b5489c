"""Runs that finish at the same moment, in separate transactions, as workers finish them."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from functools import partial

from kernelcup.core.leaderboards.ranking import RankChange

from .scenario import Scenario

THREADS = 8


def _all_at_once(tasks: list[Callable[[], RankChange | None]]) -> list[RankChange | None]:
    start = threading.Barrier(len(tasks))
    results: list[RankChange | None] = []
    errors: list[BaseException] = []

    def run(task: Callable[[], RankChange | None]) -> None:
        try:
            start.wait()
            results.append(task())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=run, args=(task,)) for task in tasks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker hung"
    assert errors == []
    return results


def test_one_users_simultaneous_runs_leave_exactly_the_best(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    rng = random.Random(11)
    for round_ in range(3):
        user = scenario.user(f"user{round_}")
        scores = [rng.uniform(1, 2) for _ in range(THREADS)]
        submissions = [scenario.submit(board, user) for _ in scores]
        changes = _all_at_once(
            [
                partial(scenario.finish, submission, score)
                for submission, score in zip(submissions, scores, strict=True)
            ]
        )
        mine = [entry for entry in scenario.entries(board) if entry[2] == user]
        assert len(mine) == 1
        assert mine[0][5] == min(scores)
        assert mine[0][4] == submissions[scores.index(min(scores))]
        improved = [change for change in changes if change is not None]
        # Serialised per entry: exactly one run saw no entry before it.
        assert [change.old_rank for change in improved].count(None) == 1


def test_many_users_entering_at_once_all_get_ranked(scenario: Scenario) -> None:
    board = scenario.leaderboard()
    users = [scenario.user(f"user{i}") for i in range(THREADS)]
    submissions = [scenario.submit(board, user) for user in users]
    changes = _all_at_once(
        [partial(scenario.finish, submission, 1.0 + i) for i, submission in enumerate(submissions)]
    )
    assert all(change is not None and change.old_rank is None for change in changes)
    assert sorted(entry[2] for entry in scenario.entries(board)) == sorted(users)
