"""Charts for chat (``kernelcup.core.charts``): what a picture shows is checked on the plot data
and on what matplotlib was given; the PNG is checked to decode to a picture of a sensible size.
A request without ``pictures`` (the terminal, the web) gets the same reply as before; without
matplotlib, no picture and one log line naming the extra."""

from __future__ import annotations

import io
import sys

import pytest
from matplotlib.image import imread
from sqlmodel import Session, select
from structlog.testing import capture_logs

from kernelcup.core.app import Kernelcup
from kernelcup.core.charts import drawing
from kernelcup.core.charts.drawing import NOTICE, ranking_figure
from kernelcup.core.charts.plots import ranking_plot, submission_history_plots
from kernelcup.core.leaderboards.ranking import standings
from kernelcup.core.messages import Actor, Image, Reply
from kernelcup.core.store.models import Leaderboard
from tests.core.conftest import ALICE, BOB, InstantRunner, finish, request, solution

CAROL = Actor("slack:T1/U3", "carol")
PNG = b"\x89PNG\r\n\x1a\n"


async def _ranked(app: Kernelcup, runner: InstantRunner, actor: Actor, score: float, noise: float = 0.0) -> int:
    runner.score_s, runner.noise = score, noise
    reply = await app.handle(request("submit", actor, files={"k.py": solution("vectoradd")}, mode="ranked"))
    assert reply.submission_id is not None, reply.text()
    await finish(app, reply.submission_id)
    return reply.submission_id


async def _show(app: Kernelcup, *, pictures: bool) -> Reply:
    asked = request("show", ALICE, leaderboard="vectoradd")
    asked.pictures = pictures
    reply = await app.handle(asked)
    assert reply.ok, reply.text()
    return reply


def _images(reply: Reply) -> list[Image]:
    return [b for b in reply.blocks if isinstance(b, Image)]


def _board_id(app: Kernelcup) -> int:
    with Session(app.engine) as session:
        board_id = session.exec(select(Leaderboard.id).where(Leaderboard.name == "vectoradd")).one()
    assert board_id is not None
    return board_id


async def test_show_for_an_adapter_with_pictures_attaches_the_ranking_as_a_png(app: Kernelcup,
                                                                                runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 1e-3, noise=0.05)
    await _ranked(app, runner, CAROL, 2e-3, noise=0.05)
    (image,) = _images(await _show(app, pictures=True))
    assert image.name == "vectoradd-cpu-ranking.png"
    assert image.png.startswith(PNG)
    height, width, _ = imread(io.BytesIO(image.png)).shape
    assert width == 800 and 150 <= height <= 1000
    assert "95% range" in image.alt


async def test_show_without_pictures_is_text_and_tables_as_before(app: Kernelcup, runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 1e-3, noise=0.05)
    plain = await _show(app, pictures=False)
    assert not _images(plain)
    pictured = await _show(app, pictures=True)
    assert [b for b in pictured.blocks if not isinstance(b, Image)] == plain.blocks


async def test_the_ranking_chart_plots_each_entry_with_its_range_and_ties(app: Kernelcup,
                                                                           runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 1.00e-3, noise=0.05)
    await _ranked(app, runner, CAROL, 1.04e-3, noise=0.05)  # its range meets bob's: tied
    await _ranked(app, runner, ALICE, 3e-3, noise=0.01)
    with Session(app.engine) as session:
        plot = ranking_plot("vectoradd on cpu", standings(session, _board_id(app), "cpu"))
    assert [(e.label, e.user_name) for e in plot.entries] == [("1=", "bob"), ("1=", "carol"), ("3", "alice")]
    assert plot.entries[0].low == pytest.approx(0.95e-3) and plot.entries[0].high == pytest.approx(1.05e-3)

    axes = ranking_figure(plot).axes[0]
    assert [t.get_text() for t in axes.get_yticklabels()] == ["1=  bob", "1=  carol", "3  alice"]
    plotted = {}  # row -> (score, low, high) in ms, as the error bars were drawn
    for container in axes.containers:
        dots, _, (bars,) = container
        for x, y, segment in zip(dots.get_xdata(), dots.get_ydata(), bars.get_segments(), strict=True):
            plotted[int(y)] = (x, segment[0][0], segment[1][0])
    assert plotted[0] == pytest.approx((1.0, 0.95, 1.05))
    assert plotted[1] == pytest.approx((1.04, 0.988, 1.092))
    assert plotted[2] == pytest.approx((3.0, 2.97, 3.03))
    assert "ms" in axes.get_xlabel() and "tied within noise" in axes.get_title()


async def test_a_ranked_report_with_pictures_ends_with_the_history_against_the_leader(
        app: Kernelcup, runner: InstantRunner) -> None:
    first = await _ranked(app, runner, ALICE, 3e-3)
    await _ranked(app, runner, BOB, 1e-3)
    second = await _ranked(app, runner, ALICE, 2e-3)

    with Session(app.engine) as session:
        (plot,) = submission_history_plots(session, second)
    mine, leader = plot.lines
    assert mine.name == "alice" and [(p.submission_id, p.score) for p in mine.points] == [(first, 3e-3), (second, 2e-3)]
    assert leader.name == "bob (leader)" and [p.score for p in leader.points] == [1e-3]
    assert plot.submission_id == second and plot.gpu == "cpu"

    report = await app.submission_report(second, pictures=True)
    (image,) = _images(report)
    assert image.name == f"submission-{second}-cpu-history.png" and image.png.startswith(PNG)
    assert imread(io.BytesIO(image.png)).shape[1] == 800
    assert not _images(await app.submission_report(second))


async def test_the_leaders_own_history_is_drawn_against_the_boards_record(app: Kernelcup,
                                                                          runner: InstantRunner) -> None:
    await _ranked(app, runner, BOB, 2e-3)
    mine = await _ranked(app, runner, ALICE, 1e-3)
    with Session(app.engine) as session:
        (plot,) = submission_history_plots(session, mine)
    assert plot.lines[1].name == "record on the board"
    assert [(p.user_name, p.score) for p in plot.lines[1].points] == [("bob", 2e-3), ("alice", 1e-3)]


async def test_a_test_run_has_no_history_chart(app: Kernelcup) -> None:
    reply = await app.handle(request("submit", BOB, files={"k.py": solution("vectoradd")}, mode="test"))
    assert reply.submission_id is not None
    await finish(app, reply.submission_id)
    assert not _images(await app.submission_report(reply.submission_id, pictures=True))


async def test_without_matplotlib_no_pictures_and_one_line_naming_the_extra(
        app: Kernelcup, runner: InstantRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    submission_id = await _ranked(app, runner, BOB, 1e-3, noise=0.05)
    plain = await _show(app, pictures=False)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(drawing, "_said", type(drawing._said)())
    with capture_logs() as logs:
        assert (await _show(app, pictures=True)).blocks == plain.blocks
        assert not _images(await app.submission_report(submission_id, pictures=True))
    assert [line["event"] for line in logs if "Charts" in line["event"]] == [NOTICE]
    assert NOTICE == "Charts are off: pip install 'kernelcup[charts]' turns them on."
