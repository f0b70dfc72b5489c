"""Owed reports: which submissions a chat adapter must follow again when it connects, and the claim
that lets exactly one bot process deliver a report."""

from __future__ import annotations

import threading
from datetime import timedelta

from sqlalchemy import MetaData, insert, update
from sqlmodel import col, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Request
from kernelcup.core.pipeline.delivery import claim_report, owed_reports, report_delivered, set_reply_to
from kernelcup.core.store.db import make_engine, session_scope, upgrade
from kernelcup.core.store.models import Job, JobStatus, Submission
from tests.core.conftest import BOB, NOW, finish, request, solution


async def submitted(app: Kernelcup, reply_to: str | None) -> int:
    asked: Request = request("submit", files={"k.py": solution("vectoradd")}, mode="test")
    asked.reply_to = reply_to
    reply = await app.handle(asked)
    assert reply.submission_id is not None, reply.text()
    return reply.submission_id


def hold(app: Kernelcup, submission_id: int) -> None:
    """As if its job still ran (a worker holds it)."""
    with session_scope(app.engine) as session:
        session.execute(update(Job).where(col(Job.submission_id) == submission_id)
                        .values(status=JobStatus.RUNNING))


async def test_owed_reports_are_the_adapters_own_running_or_undelivered_submissions(app: Kernelcup) -> None:
    finished = await submitted(app, "discord:1/2/3")
    await finish(app, finished)
    delivered = await submitted(app, "discord:1/2/4")
    await finish(app, delivered)
    assert claim_report(app.engine, delivered, NOW)
    elsewhere = await submitted(app, "slack:T1/C1/1700000000.000001")
    await finish(app, elsewhere)
    web = await submitted(app, "web")
    await finish(app, web)
    running = await submitted(app, "discord:dm/5")
    await finish(app, running)
    hold(app, running)

    owed = owed_reports(app.engine, "discord:")

    assert [(o.submission_id, o.reply_to, o.finished) for o in owed] == [
        (finished, "discord:1/2/3", True), (running, "discord:dm/5", False)]
    assert {o.submitter for o in owed} == {BOB.identity}
    assert [o.submission_id for o in owed_reports(app.engine, "slack:")] == [elsewhere]


async def test_a_prefix_is_matched_literally(app: Kernelcup) -> None:
    await finish(app, await submitted(app, "discordXsomething"))
    assert owed_reports(app.engine, "discord_") == []  # "_" is no LIKE wildcard here


async def test_set_reply_to_records_where_the_message_is(app: Kernelcup) -> None:
    submission_id = await submitted(app, "discord:1/2")
    set_reply_to(app.engine, submission_id, "discord:1/2/99")
    assert [o.reply_to for o in owed_reports(app.engine, "discord:")] == ["discord:1/2/99"]


async def test_a_report_is_claimed_only_once_its_jobs_have_ended(app: Kernelcup) -> None:
    submission_id = await submitted(app, "discord:1/2/3")
    await finish(app, submission_id)
    hold(app, submission_id)
    assert not claim_report(app.engine, submission_id, NOW)
    assert not report_delivered(app.engine, submission_id)
    with session_scope(app.engine) as session:
        session.execute(update(Job).where(col(Job.submission_id) == submission_id)
                        .values(status=JobStatus.SUCCEEDED))
    assert claim_report(app.engine, submission_id, NOW)
    assert report_delivered(app.engine, submission_id)
    assert not claim_report(app.engine, submission_id, NOW + timedelta(seconds=1))
    assert owed_reports(app.engine, "discord:") == []
    with session_scope(app.engine) as session:
        assert session.get(Submission, submission_id).delivered_at == NOW  # type: ignore[union-attr]


async def test_processes_claiming_together_deliver_once(app: Kernelcup) -> None:
    submission_id = await submitted(app, "slack:T1/C1/1700000000.000001")
    await finish(app, submission_id)
    start = threading.Barrier(6)
    wins: list[bool] = []

    def claim() -> None:
        engine = make_engine(app.engine.url)  # a process of its own: its own connections
        try:
            start.wait()
            wins.append(claim_report(engine, submission_id, NOW))
        finally:
            engine.dispose()

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(wins) == [False] * 5 + [True]


def test_the_upgrade_marks_reports_of_finished_submissions_delivered(blank_database_url: str) -> None:
    """Before revision 0004 every finished report was delivered live: none is delivered again."""
    upgrade(blank_database_url, "0003")
    engine = make_engine(blank_database_url)
    try:
        # The tables as revision 0003 made them (read back from the database): the models'
        # newer columns are not there yet.
        at_0003 = MetaData()
        at_0003.reflect(engine, only=["user", "code", "leaderboard", "submission", "job"])
        tables = at_0003.tables
        with session_scope(engine) as session:
            user_id = session.execute(insert(tables["user"]).values(
                identity="discord:1", display_name="one", banned=False, created_at=NOW,
            ).returning(tables["user"].c.id)).scalar_one()
            session.execute(insert(tables["code"]).values(sha256="0" * 64, content="x"))
            board_id = session.execute(insert(tables["leaderboard"]).values(
                name="b", description="", lang="py", deadline=NOW, ranking_by="geom", visibility="public",
                task_json="{}", secret_seed=1, paused=False, created_at=NOW,
            ).returning(tables["leaderboard"].c.id)).scalar_one()
            for status in (JobStatus.SUCCEEDED, JobStatus.RUNNING):
                submission_id = session.execute(insert(tables["submission"]).values(
                    leaderboard_id=board_id, user_id=user_id, code_sha256="0" * 64, file_name="k.py", mode="test",
                    reply_to="discord:1/2/3", created_at=NOW,
                ).returning(tables["submission"].c.id)).scalar_one()
                session.execute(insert(tables["job"]).values(
                    submission_id=submission_id, gpu="cpu", runner="local", status=status.value, attempts=0,
                    queued_at=NOW, finished_at=NOW + timedelta(minutes=1) if status.finished else None))
        upgrade(blank_database_url)
        with session_scope(engine) as session:
            rows = session.exec(select(Submission).order_by(col(Submission.id))).all()
            assert [row.delivered_at for row in rows] == [NOW + timedelta(minutes=1), None]
        assert [o.finished for o in owed_reports(engine, "discord:")] == [False]
    finally:
        engine.dispose()
