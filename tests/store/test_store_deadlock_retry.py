"""A transaction PostgreSQL aborts to break a deadlock is done again, not lost."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.store.db import in_transaction, session_scope
from kernelcup.core.store.models import User


def test_both_sides_of_a_deadlock_complete(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has one writer at a time: it cannot deadlock")
    with session_scope(engine) as session:
        session.add_all([User(identity="console:a", display_name="a"), User(identity="console:b", display_name="b")])
    both_hold_one = threading.Barrier(2)
    attempts: dict[str, int] = {"ab": 0, "ba": 0}
    errors: list[BaseException] = []

    def lock_in_order(first: str, second: str, key: str) -> None:
        def work(session: Session) -> None:
            attempts[key] += 1
            session.exec(select(User).where(User.identity == first).with_for_update()).one()
            if attempts[key] == 1:
                both_hold_one.wait(timeout=10)  # each holds its first row: the second lock deadlocks
            user = session.exec(select(User).where(User.identity == second).with_for_update()).one()
            user.display_name += key

        try:
            in_transaction(engine, work)
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=lock_in_order, args=("console:a", "console:b", "ab")),
        threading.Thread(target=lock_in_order, args=("console:b", "console:a", "ba")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert sorted(attempts.values()) == [1, 2]  # one side was the victim and ran again
    with session_scope(engine) as session:
        names = {u.identity: u.display_name for u in session.exec(select(User)).all()}
    assert names == {"console:a": "aba", "console:b": "bab"}
