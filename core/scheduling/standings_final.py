"""The final standings: the top entries of a closed leaderboard re-run fairly, then ranked.

Why re-run at all: each entry's best score was measured once, at some moment over weeks, on
whatever machine and clocks it got. At the close the top N per GPU (config) run again, back to
back on the same runner, ``rounds`` times, interleaved (A B C A B C ...) so that drift in clocks
or temperature hits every entry alike. The leaderboard's secret seed was replaced at the close,
and every ranked run draws a fresh nonce on top, so the inputs are new to every kernel.

A re-run is an ordinary submission in ``FINAL_MODE`` owned by the entry's author, queued through
the normal pipeline (so any runner, the local CPU one included, runs it); ``FinalRun`` links it
to the entry it re-evaluates. Final-mode runs never enter ``BestScore``.

Ties: each round's result carries, per benchmark case, the 95% confidence interval of the median.
An entry's noise range is its score computed from the lowest and from the highest of those
bounds over all rounds (the scoring function is monotone, so this bounds the score). An entry
whose range reaches the range of the entry leading its group is tied with it and shares its rank.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, exists, not_, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from kernelcup.core.access.visibility import PUBLIC, status_words
from kernelcup.core.config import Settings
from kernelcup.core.leaderboards.catalog import leaderboard_gpus
from kernelcup.core.leaderboards.ranking import competition_ranks, standings
from kernelcup.core.pipeline.fairness import current_turn
from kernelcup.core.scheduling.notices import FinalRow
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import (
    FINAL_MODE,
    FinalRun,
    FinalStanding,
    Job,
    JobStatus,
    Leaderboard,
    Run,
    Submission,
    User,
)
from kernelcup.harness.scoring import combine
from kernelcup.harness.spec import Mode, Result, SpecError

_OPEN = (JobStatus.QUEUED.value, JobStatus.RUNNING.value)


@dataclass(frozen=True)
class Measure:
    score: float  # seconds
    low: float  # the measured noise range of the score
    high: float


@dataclass(frozen=True)
class Step:
    """What advancing a closed leaderboard's final standings did."""

    done: bool  # nothing left to do (standings announced, or the board is gone or reopened)
    queued_jobs: int = 0  # re-runs this call queued
    name: str = ""
    public: bool = True
    rows: dict[str, list[FinalRow]] | None = None  # set once, for the process that claimed them


def _open_jobs(board_id: int, mode: str) -> ColumnElement[bool]:
    return exists(
        select(Job.id)
        .join(Submission, col(Submission.id) == col(Job.submission_id))
        .where(
            col(Submission.leaderboard_id) == board_id,
            col(Submission.mode) == mode,
            col(Job.status).in_(_OPEN),
        )
    )


def advance(engine: Engine, settings: Settings, board_id: int, now: datetime, top_n: int, rounds: int) -> Step:
    """One step, safe to call from any process at any time: queue the re-runs once the ranked
    runs that arrived in time are done; rank and store once the re-runs are done."""
    with session_scope(engine) as session:
        queued = session.execute(
            update(Leaderboard)
            .where(
                col(Leaderboard.id) == board_id,
                col(Leaderboard.closed_at).is_not(None),
                col(Leaderboard.final_queued_at).is_(None),
                not_(_open_jobs(board_id, Mode.RANKED.value)),
            )
            .values(final_queued_at=now)
            .returning(col(Leaderboard.id))
        ).first()
        if queued is not None:
            return Step(done=False, queued_jobs=_queue_reruns(session, settings, board_id, now, top_n, rounds))
    with session_scope(engine) as session:
        finished = session.execute(
            update(Leaderboard)
            .where(
                col(Leaderboard.id) == board_id,
                col(Leaderboard.final_queued_at).is_not(None),
                col(Leaderboard.final_done_at).is_(None),
                not_(_open_jobs(board_id, FINAL_MODE)),
            )
            .values(final_done_at=now)
            .returning(col(Leaderboard.id))
        ).first()
        if finished is not None:
            board = session.get(Leaderboard, board_id)
            assert board is not None
            rows = _rank_and_store(session, board)
            return Step(done=True, name=board.name, public=board.visibility == "public", rows=rows)
        board = session.get(Leaderboard, board_id)
        return Step(done=board is None or board.closed_at is None or board.final_done_at is not None)


def _queue_reruns(
    session: Session, settings: Settings, board_id: int, now: datetime, top_n: int, rounds: int
) -> int:
    """Per GPU: a re-run submission per top entry, then their jobs round by round (A B C A B C),
    in one transaction, so the jobs' ids, and with them the runner's order, are interleaved."""
    count = 0
    for gpu in leaderboard_gpus(session, board_id):
        if gpu not in settings.gpus:
            continue  # no runner could take it; the entries keep their pre-close ranks
        reruns = []
        for entry in standings(session, board_id, gpu, limit=top_n):
            original = session.get(Submission, entry.submission_id)
            assert original is not None
            rerun = Submission(leaderboard_id=board_id, user_id=entry.user_id, code_sha256=original.code_sha256,
                               file_name=original.file_name, mode=FINAL_MODE, created_at=now)
            session.add(rerun)
            session.flush()
            assert rerun.id is not None
            session.add(FinalRun(leaderboard_id=board_id, gpu=gpu, user_id=entry.user_id,
                                 entry_submission_id=entry.submission_id, submission_id=rerun.id,
                                 rank_before=entry.rank, score_before=entry.score))
            reruns.append(rerun.id)
        runner = settings.gpus[gpu].runner
        turn = current_turn(session, runner, gpu)  # every re-run on the same turn: ids keep the rounds
        for _ in range(rounds):
            for submission_id in reruns:
                session.add(Job(submission_id=submission_id, gpu=gpu, runner=runner, queued_at=now, turn=turn))
                session.flush()  # one at a time: ids in exactly this order
                count += 1
    return count


def _rank_and_store(session: Session, board: Leaderboard) -> dict[str, list[FinalRow]]:
    assert board.id is not None
    reruns = session.exec(
        select(FinalRun).where(col(FinalRun.leaderboard_id) == board.id).order_by(col(FinalRun.id))
    ).all()
    withdrawn = set(session.exec(select(Submission.id).where(
        col(Submission.leaderboard_id) == board.id, col(Submission.withdrawn_at).is_not(None))).all())
    reruns = [rerun for rerun in reruns if rerun.entry_submission_id not in withdrawn]  # withdraw()
    names = dict(session.exec(select(User.id, User.display_name)).all())
    by_gpu: dict[str, list[FinalRow]] = {}
    for gpu in dict.fromkeys(rerun.gpu for rerun in reruns):
        entries = [_evaluate(session, rerun, board.ranking_by) for rerun in reruns if rerun.gpu == gpu]
        rows = by_gpu[gpu] = []
        for entry in rank_entries(entries):
            rerun, m = entry.rerun, entry.measure
            low, high = (m.low, m.high) if m else (None, None)
            score = m.score if m else None
            rows.append(FinalRow(entry.rank, entry.tied, names.get(rerun.user_id, "?"), score, low, high,
                                 rerun.rank_before, rerun.entry_submission_id, entry.note))
            session.add(FinalStanding(leaderboard_id=board.id, gpu=gpu, rank=entry.rank, tied=entry.tied,
                                      user_id=rerun.user_id, submission_id=rerun.entry_submission_id, score=score,
                                      score_low=low, score_high=high, rank_before=rerun.rank_before,
                                      note=entry.note))
    return by_gpu


@dataclass
class Entry:
    """One re-evaluated entry; ``rank`` and ``tied`` are filled in by ``rank_entries``."""

    rerun: FinalRun
    measure: Measure | None  # None: a round failed (``note`` says how)
    note: str = ""
    rank: int | None = None
    tied: bool = False


def _evaluate(session: Session, rerun: FinalRun, ranking_by: str) -> Entry:
    """The re-run's measure over all its rounds, or why it has none (any failed round fails it:
    a kernel that breaks on fresh inputs is not a correct kernel). The note is announced to
    everyone: public facts only (kernelcup.core.access.visibility), never what the code raised."""
    jobs = session.exec(select(Job).where(col(Job.submission_id) == rerun.submission_id).order_by(col(Job.id))).all()
    runs = {run.job_id: run for run in session.exec(select(Run).where(col(Run.submission_id) == rerun.submission_id))}
    results = []
    for job in jobs:
        run = runs.get(job.id) if job.id is not None else None
        if run is None:
            return Entry(rerun, None, f"no result: {PUBLIC.job_error(job.error) or status_words(job.status)}")
        try:
            result = Result.from_json(run.result_json)
        except SpecError:
            return Entry(rerun, None, "unreadable result")
        if not result.passed:
            return Entry(rerun, None, PUBLIC.verdict(result))
        if result.score_s is None:
            return Entry(rerun, None, "passed without a score")
        results.append(result)
    if not results:
        return Entry(rerun, None, "not re-run")
    return Entry(rerun, measure(results, ranking_by))


def measure(results: Sequence[Result], ranking_by: str) -> Measure:
    """Score (the per-case median over rounds, combined as the leaderboard ranks) and its noise
    range; results without benchmark statistics fall back to the spread of their scores."""
    cases = [result.benchmarks for result in results]
    width = len(cases[0])
    usable = width > 0 and all(
        len(round_) == width and all(case.median_ns for case in round_) for round_ in cases
    )
    if usable:
        medians, lows, highs = [], [], []
        for i in range(width):
            column = [round_[i] for round_ in cases]
            medians.append(statistics.median(c.median_ns or 0.0 for c in column) * 1e-9)
            lows.append(min(c.ci_low_ns or c.median_ns or 0.0 for c in column) * 1e-9)
            highs.append(max(c.ci_high_ns or c.median_ns or 0.0 for c in column) * 1e-9)
        try:
            return Measure(combine(ranking_by, medians), combine(ranking_by, lows), combine(ranking_by, highs))
        except ValueError:
            pass  # a zero or odd bound: use the scores instead
    scores = [result.score_s for result in results if result.score_s is not None]
    return Measure(statistics.median(scores), min(scores), max(scores))


def _score(entry: Entry) -> float:
    assert entry.measure is not None
    return entry.measure.score


def rank_entries(entries: Sequence[Entry]) -> list[Entry]:
    """Passing entries by score (the pre-close rank breaks exact ties) with competition ranks
    (1, 1, 3): an entry whose noise range reaches its group leader's shares the leader's rank,
    and both are marked tied. Comparing with the leader, not the neighbour, keeps a chain of
    small steps from tying first and last. Failed entries follow, unranked."""
    passing = sorted((e for e in entries if e.measure is not None), key=lambda e: (_score(e), e.rerun.rank_before))
    ranges = [(e.measure.low, e.measure.high) if e.measure is not None else None for e in passing]
    for entry, (rank, tied) in zip(passing, competition_ranks(ranges), strict=True):
        entry.rank, entry.tied = rank, tied
    failed = sorted((e for e in entries if e.measure is None), key=lambda e: e.rerun.rank_before)
    return [*passing, *failed]
