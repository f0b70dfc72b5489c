"""``export``: an admin takes a leaderboard's or a season's runs out as Parquet or as a Hugging Face
datasets folder; authors are pseudonyms unless they opted in (``publish-name on``), code is there
only where anyone may see it, and withdrawn submissions are left out."""

from __future__ import annotations

import io
import sys
import zipfile
from datetime import timedelta

import pyarrow.parquet as pq
import pytest
from sqlmodel import Session, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, File, Reply
from kernelcup.core.store.models import Leaderboard
from tests.core.conftest import ALICE, BOB, NOW, InstantRunner, finish, request, solution

CAROL = Actor("slack:T1/U3", "carol")


async def _ranked(app: Kernelcup, runner: InstantRunner, actor: Actor, score: float) -> int:
    runner.score_s = score
    reply = await app.handle(request("submit", actor, files={"k.py": solution("vectoradd")}, mode="ranked"))
    assert reply.submission_id is not None, reply.text()
    await finish(app, reply.submission_id)
    return reply.submission_id


def _file(reply: Reply) -> File:
    assert reply.ok, reply.text()
    return next(b for b in reply.blocks if isinstance(b, File))


def _rows(reply: Reply) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = pq.read_table(io.BytesIO(_file(reply).content)).to_pylist()
    return rows


def _close(app: Kernelcup, name: str) -> None:
    with Session(app.engine) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == name)).one()
        board.deadline = NOW - timedelta(hours=1)
        session.add(board)
        session.commit()


async def test_authors_are_pseudonyms_unless_they_opted_in(app: Kernelcup, runner: InstantRunner) -> None:
    runner.noise = 0.01
    await _ranked(app, runner, BOB, 1e-3)
    await _ranked(app, runner, CAROL, 2e-3)
    assert (await app.handle(request("publish-name", CAROL, choice="on"))).ok
    rows = _rows(await app.handle(request("export", ALICE, leaderboard=["vectoradd"])))
    users = {str(r["user"]) for r in rows}
    assert "carol" in users and "bob" not in users
    assert [r["named"] for r in rows if r["user"] != "carol"] == [False]
    bob = next(r for r in rows if str(r["user"]).startswith("anon-"))
    assert bob["score_s"] == pytest.approx(1e-3)
    assert (bob["score_low_s"], bob["score_high_s"]) == (pytest.approx(0.99e-3), pytest.approx(1.01e-3))
    again = _rows(await app.handle(request("export", ALICE, leaderboard=["vectoradd"])))
    assert {r["user"] for r in again} == users  # a pseudonym is stable across exports


async def test_code_is_exported_only_where_anyone_may_see_it(app: Kernelcup, runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 1e-3)
    before = _rows(await app.handle(request("export", ALICE, leaderboard=["vectoradd"])))
    assert [r["code"] for r in before] == [None]
    _close(app, "vectoradd")
    after = _rows(await app.handle(request("export", ALICE, leaderboard=["vectoradd"])))
    assert after[0]["code"] == solution("vectoradd").decode()


async def test_withdrawn_submissions_are_left_out(app: Kernelcup, runner: InstantRunner) -> None:
    kept = await _ranked(app, runner, BOB, 1e-3)
    gone = await _ranked(app, runner, BOB, 2e-3)
    assert (await app.handle(request("withdraw", BOB, id=gone))).ok
    rows = _rows(await app.handle(request("export", ALICE, leaderboard=["vectoradd"])))
    assert [r["submission_id"] for r in rows] == [kept]


async def test_a_season_is_every_leaderboard_closing_in_it(app: Kernelcup, runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 1e-3)
    with Session(app.engine) as session:
        closes = session.exec(select(Leaderboard.deadline).where(Leaderboard.name == "vectoradd")).one()
    reply = await app.handle(request("export", ALICE, season=str(closes.year)))
    assert "vectoradd" in reply.text() and _rows(reply)[0]["leaderboard"] == "vectoradd"
    empty = await app.handle(request("export", ALICE, season="1999"))
    assert not empty.ok and "No leaderboard" in empty.text()


async def test_the_dataset_folder_holds_the_parquet_split_and_a_card(app: Kernelcup, runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 1e-3)
    reply = await app.handle(request("export", ALICE, leaderboard=["vectoradd"], format="dataset"))
    with zipfile.ZipFile(io.BytesIO(_file(reply).content)) as bundle:
        names = bundle.namelist()
        card = bundle.read(next(n for n in names if n.endswith("README.md"))).decode()
        data = next(n for n in names if n.endswith(".parquet"))
        assert pq.read_table(io.BytesIO(bundle.read(data))).num_rows == 1
    assert data.endswith("/data/train-00000-of-00001.parquet")
    assert "split: train" in card and "path: data/train-*.parquet" in card


async def test_only_admins_export(app: Kernelcup) -> None:
    reply = await app.handle(request("export", BOB, leaderboard=["vectoradd"]))
    assert not reply.ok and "Only admins" in reply.text()


async def test_without_pyarrow_export_is_one_line_naming_the_extra(app: Kernelcup,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    reply = await app.handle(request("export", ALICE, leaderboard=["vectoradd"]))
    assert not reply.ok
    assert reply.blocks[0].fallback() == "Export is off: pip install 'kernelcup[export]' turns it on."
