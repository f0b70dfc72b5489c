"""Leaderboards, rankings and the best score over time, read for the API and the pages.

Rankings come from ``kernelcup.core.leaderboards.ranking.standings`` (the one ranking query); visibility from
``kernelcup.core.access.visibility``. These are plain synchronous reads: callers run them in a thread.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from sqlmodel import Session, col, select

from kernelcup.adapters.web.auth import ApiError, Viewer
from kernelcup.adapters.web.schemas import HistoryPoint, LeaderboardDetail, LeaderboardSummary, Ranking, RankingEntry
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.core.access.visibility import code_public_after_deadline, may_see_board
from kernelcup.core.app import Kernelcup
from kernelcup.core.leaderboards.catalog import runnable_gpus, task_of, templates_of, world_size_of
from kernelcup.core.leaderboards.history import record_over_time
from kernelcup.core.leaderboards.ranking import entry_counts, standings, tie_labels
from kernelcup.core.store.db import as_utc, session_scope
from kernelcup.core.store.models import BestScore, Leaderboard, Run
from kernelcup.harness.spec import CaseResult, Result, SpecError

MAX_RANKING = 200


def visible_board(session: Session, viewer: Viewer, name: str) -> Leaderboard:
    board = session.exec(select(Leaderboard).where(Leaderboard.name == name)).first()
    if board is None or not may_see_board(board, user_id=viewer.user_id, role=viewer.role):
        raise ApiError(404, f"There is no leaderboard {name!r}.", "GET /api/leaderboards lists them.", "not_found")
    return board


def summary(session: Session, app: Kernelcup, web: WebSettings, board: Leaderboard, entries: int) -> LeaderboardSummary:
    assert board.id is not None
    deadline = as_utc(board.deadline)
    return LeaderboardSummary(
        name=board.name, deadline=deadline, closed=deadline <= app.now(), gpus=runnable_gpus(session, board),
        entries=entries, lang=board.lang, hidden=board.visibility != "public",
        url=web.url(f"/leaderboards/{board.name}"), world_size=world_size_of(board),
    )


def list_leaderboards(app: Kernelcup, web: WebSettings, viewer: Viewer) -> list[LeaderboardSummary]:
    with session_scope(app.engine) as session:
        ordered = select(Leaderboard).order_by(col(Leaderboard.deadline), col(Leaderboard.name))
        boards = [b for b in session.exec(ordered) if may_see_board(b, user_id=viewer.user_id, role=viewer.role)]
        counts = entry_counts(session, [b.id for b in boards if b.id is not None])
        return [summary(session, app, web, b, counts.get(b.id or 0, 0)) for b in boards]


def leaderboard_detail(app: Kernelcup, web: WebSettings, viewer: Viewer, name: str) -> LeaderboardDetail:
    with session_scope(app.engine) as session:
        board = visible_board(session, viewer, name)
        assert board.id is not None
        task = task_of(board)
        base = summary(session, app, web, board, entry_counts(session, [board.id]).get(board.id, 0))
        return LeaderboardDetail(
            **base.model_dump(),
            description=board.description,
            ranking_by=board.ranking_by,
            tests=len(task.get("tests") or []),
            benchmarks=len(task.get("benchmarks") or []),
            templates=sorted(templates_of(board)),
            code_public_after_deadline=code_public_after_deadline(board, web.code_public_after_deadline),
        )


def rankings(app: Kernelcup, viewer: Viewer, name: str, gpu: str | None = None, limit: int = 50,
             offset: int = 0) -> list[Ranking]:
    """One ranking per GPU of the leaderboard (or only ``gpu``)."""
    with session_scope(app.engine) as session:
        board = visible_board(session, viewer, name)
        assert board.id is not None
        gpus = _chosen_gpus(session, board, gpu)
        limit = max(1, min(limit, MAX_RANKING))
        out = []
        for one in gpus:
            entries = standings(session, board.id, one, limit=limit, offset=max(0, offset))
            figures = _throughput(session, board.id, one, [e.user_id for e in entries])
            out.append(Ranking(leaderboard=board.name, gpu=one, entries=[
                RankingEntry(rank=e.rank, rank_label=label, user_id=e.user_id, user_name=e.user_name,
                             score_s=e.score, score_low_s=e.score_low, score_high_s=e.score_high,
                             submission_id=e.submission_id, submitted_at=as_utc(e.submitted_at),
                             **figures.get(e.user_id, {}))
                for label, e in zip(tie_labels(entries), entries, strict=True)
            ]))
        return out


def history(app: Kernelcup, viewer: Viewer, name: str, gpu: str) -> list[HistoryPoint]:
    """Each time the leaderboard's best ranked score on ``gpu`` improved (banned users left out)."""
    with session_scope(app.engine) as session:
        board = visible_board(session, viewer, name)
        assert board.id is not None
        (one,) = _chosen_gpus(session, board, gpu)
        return [HistoryPoint(at=p.at, score_s=p.score, user_name=p.user_name, submission_id=p.submission_id)
                for p in record_over_time(session, board.id, one)]


def _chosen_gpus(session: Session, board: Leaderboard, gpu: str | None) -> list[str]:
    assert board.id is not None
    gpus = runnable_gpus(session, board)
    if gpu is None:
        return gpus
    match = [g for g in gpus if g.lower() == gpu.lower()]
    if not match:
        raise ApiError(404, f"{board.name} does not run on {gpu}.", f"It runs on {', '.join(gpus)}.", "not_found")
    return match


def _throughput(session: Session, board_id: int, gpu: str, user_ids: list[int]) -> dict[int, dict[str, float]]:
    """Achieved GB/s, TFLOP/s and % of peak of each entry's run, when its result has them."""
    if not user_ids:
        return {}
    rows = session.exec(
        select(BestScore.user_id, Run.result_json)
        .join(Run, col(Run.id) == col(BestScore.run_id))
        .where(col(BestScore.leaderboard_id) == board_id, col(BestScore.gpu) == gpu,
               col(BestScore.user_id).in_(user_ids))
    ).all()
    out: dict[int, dict[str, float]] = {}
    for user_id, result_json in rows:
        cases = benchmark_cases(result_json)
        figures = {
            name: value
            for name in ("gbps", "tflops", "percent_of_peak")
            if (value := geometric_mean(getattr(c, name) for c in cases)) is not None
        }
        if figures:
            out[user_id] = figures
    return out


def benchmark_cases(result_json: str) -> list[CaseResult]:
    try:
        return Result.from_json(result_json).benchmarks
    except (SpecError, json.JSONDecodeError):
        return []


def geometric_mean(values: Iterable[float | None]) -> float | None:
    positive = [v for v in values if v is not None and v > 0]
    if not positive:
        return None
    return math.exp(sum(math.log(v) for v in positive) / len(positive))
