"""Every way a submission can be refused gets a clear message, and leaves nothing behind."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Code, Job, Leaderboard, Submission, User
from tests.core.conftest import ALICE, BOB, NOW, request, solution


def counts(app: Kernelcup) -> tuple[int, int, int]:
    with Session(app.engine) as session:
        return tuple(  # type: ignore[return-value]
            session.exec(select(func.count()).select_from(table)).one() for table in (Submission, Job, Code)
        )


async def refused(app: Kernelcup, *args: object, **kwargs: object) -> str:
    before = counts(app)
    reply = await app.handle(request(*args, **kwargs))  # type: ignore[arg-type]
    assert not reply.ok
    assert counts(app) == before, "a refused submission left rows behind"
    return reply.text()


async def test_a_good_submission_is_stored_with_one_job_per_gpu(app: Kernelcup) -> None:
    reply = await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))
    assert reply.ok and reply.submission_id is not None
    assert counts(app) == (1, 1, 1)


async def test_unknown_leaderboard_names_the_closest(app: Kernelcup) -> None:
    text = await refused(app, "submit", files={"k.py": b"def custom_kernel(d): return d"},
                         mode="test", leaderboard="vectoraddd")
    assert "no leaderboard 'vectoraddd'" in text and "Did you mean vectoradd?" in text


async def test_unknown_gpu_for_the_leaderboard_lists_its_gpus(app: Kernelcup) -> None:
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="test", gpu=["MI300"])
    assert "does not run on MI300" in text and "cpu" in text


async def test_wrong_file_type(app: Kernelcup) -> None:
    text = await refused(app, "submit", files={"k.cu": b"__global__ void k() {}"}, mode="test",
                         leaderboard="vectoradd")
    assert "not a .py file" in text


async def test_empty_file(app: Kernelcup) -> None:
    text = await refused(app, "submit", files={"k.py": b"  \n"}, mode="test", leaderboard="vectoradd")
    assert "k.py is empty" in text


async def test_file_over_the_size_limit(app: Kernelcup) -> None:
    big = b"#" * (app.settings.limits.max_file_bytes + 1)
    text = await refused(app, "submit", files={"k.py": big}, mode="test", leaderboard="vectoradd")
    assert "the limit is 1024 KiB" in text


async def test_non_utf8_source(app: Kernelcup) -> None:
    text = await refused(app, "submit", files={"k.py": b"x = '\xff\xfe'"}, mode="test", leaderboard="vectoradd")
    assert "not UTF-8" in text


async def test_no_leaderboard_named_anywhere(app: Kernelcup) -> None:
    text = await refused(app, "submit", files={"k.py": b"def custom_kernel(d): return d"}, mode="test")
    assert "Which leaderboard" in text and "#!POPCORN leaderboard" in text


async def test_ranked_after_the_deadline_but_test_still_works(app: Kernelcup) -> None:
    with session_scope(app.engine) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == "vectoradd")).one()
        board.deadline = NOW - timedelta(minutes=1)
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="ranked")
    assert "closed at 2026-11-21 11:59 UTC" in text
    ok = await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))
    assert ok.ok


async def test_banned_user(app: Kernelcup) -> None:
    await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))
    assert (await app.handle(request("ban", ALICE, user=BOB.identity))).ok
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="test")
    assert "banned" in text
    assert (await app.handle(request("unban", ALICE, user=BOB.identity))).ok


async def test_rate_limit(app: Kernelcup) -> None:
    assert (await app.handle(request("rate-limit", ALICE, leaderboard="vectoradd", mode="test", per_hour=1))).ok
    assert (await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))).ok
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="test")
    assert "Rate limit reached: 1 test submissions per hour" in text


async def test_a_default_rate_limit_holds_with_no_admin_setting_and_admins_are_exempt(app: Kernelcup) -> None:
    app.settings = replace(app.settings, limits=replace(app.settings.limits, submissions_per_hour=2))
    for _ in range(2):
        assert (await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))).ok
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="benchmark")
    assert "Rate limit reached: 2 submissions per hour on all leaderboards." in text
    for _ in range(3):  # ALICE is an admin
        assert (await app.handle(request("submit", ALICE, files={"k.py": solution("vectoradd")}, mode="test"))).ok


async def test_an_admins_limit_for_everything_replaces_the_default(app: Kernelcup) -> None:
    app.settings = replace(app.settings, limits=replace(app.settings.limits, submissions_per_hour=1))
    assert (await app.handle(request("rate-limit", ALICE, leaderboard="*", mode="*", per_hour=3))).ok
    for _ in range(3):
        assert (await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))).ok
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="test")
    assert "Rate limit reached: 3 submissions per hour on all leaderboards." in text


async def test_paused_submissions(app: Kernelcup) -> None:
    assert (await app.handle(request("pause", ALICE))).ok
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="test")
    assert "paused" in text
    assert (await app.handle(request("resume", ALICE))).ok
    assert (await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="test"))).ok


async def test_a_user_cannot_use_admin_commands(app: Kernelcup) -> None:
    reply = await app.handle(request("ban", BOB, user=ALICE.identity))
    assert not reply.ok and "Only admins" in reply.text()
    with Session(app.engine) as session:
        assert not any(u.banned for u in session.exec(select(User)).all())


@pytest.mark.parametrize("mode", ["fast", ""])
async def test_unknown_mode(app: Kernelcup, mode: str) -> None:
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode=mode)
    assert "mode" in text


async def test_limits_come_from_the_settings(app: Kernelcup) -> None:
    app.settings = replace(app.settings, limits=replace(app.settings.limits, max_file_bytes=10))
    text = await refused(app, "submit", files={"k.py": solution("vectoradd")}, mode="test")
    assert "the limit is 0 KiB" in text
