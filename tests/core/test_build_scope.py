"""The job spec says whose job it is, so build caches are shared only within one leaderboard and user.

The harness keeps a job's builds per leaderboard, user and source (harness/workspace.py): the
spec's ``leaderboard`` (its name and creator) and ``user`` must tell two users apart, and a board
made under a deleted one's name by someone else apart from the old one.
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.pipeline.jobspec import build_spec
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Job, Leaderboard, User
from kernelcup.harness.spec import JobSpec
from kernelcup.harness.workspace import job_cache_dir
from tests.pipeline.support import make_settings, seed_leaderboard, submit


def spec_of(engine: Engine, job_id: int) -> JobSpec:
    with Session(engine) as session:
        row = session.get(Job, job_id)
        assert row is not None
        return build_spec(session, row, make_settings())


def test_two_users_jobs_of_the_same_code_on_one_leaderboard_keep_their_builds_apart(engine: Engine) -> None:
    seed_leaderboard(engine)
    [alice] = submit(engine, user="console:alice")
    [bob] = submit(engine, user="console:bob")
    first, second, again = spec_of(engine, alice), spec_of(engine, bob), spec_of(engine, alice)
    assert (first.user, second.user) == ("console:alice", "console:bob")
    assert first.leaderboard == second.leaderboard == "vectoradd by the operator"  # synced from a folder
    assert job_cache_dir(first, "triton") != job_cache_dir(second, "triton")
    assert job_cache_dir(first, "triton") == job_cache_dir(again, "triton")


def test_a_leaderboard_of_another_creator_under_the_same_name_shares_no_builds(engine: Engine) -> None:
    seed_leaderboard(engine)
    [job_id] = submit(engine, user="console:alice")
    before = spec_of(engine, job_id)
    with session_scope(engine) as session:
        mallory = User(identity="discord:666", display_name="mallory")
        session.add(mallory)
        session.flush()
        board = session.exec(select(Leaderboard)).one()
        board.creator_id = mallory.id
        session.add(board)
    after = spec_of(engine, job_id)
    assert after.leaderboard == "vectoradd by discord:666"
    assert job_cache_dir(before, "torch_extensions") != job_cache_dir(after, "torch_extensions")
