"""What a chart shows, as plain data read from the store: drawn by ``kernelcup.core.charts.drawing``.

Kept apart from the drawing so what a picture says (which entries, which ranges, whose scores)
is checked without reading pixels, and is read with the same queries as the web pages' charts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlmodel import Session, col, select

from kernelcup.core.leaderboards.history import ScorePoint, record_over_time, user_scores
from kernelcup.core.leaderboards.ranking import Standing, standings, tie_labels
from kernelcup.core.store.models import Leaderboard, Run, Submission
from kernelcup.harness.spec import Mode

MAX_HISTORY_CHARTS = 4  # one per GPU of a ranked submission; more GPUs are rare and crowd a thread


@dataclass(frozen=True)
class RankedEntry:
    label: str  # the rank as shown: "2=" where tied within noise
    user_name: str
    score: float  # seconds
    low: float | None  # the score's 95% range, when the run measured one
    high: float | None

    @property
    def tied(self) -> bool:
        return self.label.endswith("=")


@dataclass(frozen=True)
class RankingPlot:
    title: str
    entries: tuple[RankedEntry, ...]  # in ranking order


@dataclass(frozen=True)
class ScoreLine:
    name: str  # the legend's words
    points: tuple[ScorePoint, ...]  # oldest first


@dataclass(frozen=True)
class HistoryPlot:
    title: str
    gpu: str
    lines: tuple[ScoreLine, ...]  # the submitter's first, then the leader's (or the board's record)
    submission_id: int  # the submission the picture is about: its point is marked


def ranking_plot(title: str, entries: Sequence[Standing]) -> RankingPlot:
    """A page of a ranking with each entry's noise range and tie label (``tie_labels``)."""
    return RankingPlot(title, tuple(
        RankedEntry(label, e.user_name, e.score, e.score_low, e.score_high)
        for label, e in zip(tie_labels(entries), entries, strict=True)
    ))


def history_plot(session: Session, board: Leaderboard, gpu: str, user_id: int, submission_id: int) -> HistoryPlot:
    """The user's ranked scores on (board, GPU) over time against the leader's; where the user
    leads, against the board's record as it improved."""
    assert board.id is not None
    mine = tuple(one.point for one in user_scores(session, user_id, board.id, gpu))
    name = mine[-1].user_name if mine else "you"
    lines = [ScoreLine(name, mine)]
    leader = next(iter(standings(session, board.id, gpu, limit=1)), None)
    if leader is not None and leader.user_id != user_id:
        theirs = tuple(one.point for one in user_scores(session, leader.user_id, board.id, gpu))
        lines.append(ScoreLine(f"{leader.user_name} (leader)", theirs))
    else:
        lines.append(ScoreLine("record on the board", tuple(record_over_time(session, board.id, gpu))))
    return HistoryPlot(f"{name} on {board.name} ({gpu}) against the leader", gpu, tuple(lines), submission_id)


def submission_history_plots(session: Session, submission_id: int) -> list[HistoryPlot]:
    """One history per GPU where a ranked submission passed with a score; none for other modes."""
    submission = session.get(Submission, submission_id)
    if submission is None or submission.mode != Mode.RANKED.value:
        return []
    board = session.get(Leaderboard, submission.leaderboard_id)
    assert board is not None
    runs = session.exec(select(Run).where(Run.submission_id == submission_id).order_by(col(Run.id))).all()
    gpus = list(dict.fromkeys(run.gpu for run in runs if run.passed and run.score is not None))
    return [history_plot(session, board, gpu, submission.user_id, submission_id)
            for gpu in gpus[:MAX_HISTORY_CHARTS]]
