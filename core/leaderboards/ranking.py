"""The one ranking query, and the one place ``BestScore`` is written.

Order, everywhere: lower score first, then the earlier submission, then the lower user id (only
so the order is total). A user's best run is chosen by the same rule (score, submission time,
run id), so the index that ``record_run`` keeps run by run and the one ``rebuild_best``
computes from scratch are identical whatever order the runs finished in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import ColumnElement, Table, and_, delete, func, insert, or_, text
from sqlalchemy import select as select_rows
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, select

from kernelcup.core.store.models import BestScore, Run, Submission, User
from kernelcup.harness.spec import Mode

_BEST: Table = SQLModel.metadata.tables["bestscore"]
_KEY = ("leaderboard_id", "gpu", "user_id")
# Namespace of the per-entry advisory locks (the two-int form; it never collides with the
# one-bigint lock that migrations take).
_LOCK_SPACE = 0x6B63  # "kc"


@dataclass(frozen=True)
class Standing:
    rank: int  # the place in the order; ``tie_labels`` says which places are ties within noise
    user_id: int
    user_name: str
    score: float
    submission_id: int
    submitted_at: datetime
    score_low: float | None = None  # the score's noise range, when the run measured one
    score_high: float | None = None


@dataclass(frozen=True)
class RankChange:
    """What an announcement needs after a ranked run improved its author's entry."""

    old_rank: int | None  # None: the user's first entry on this (leaderboard, GPU)
    new_rank: int
    previous_leader_user_id: int | None  # who was first just before; None on an empty board
    is_new_leader: bool  # first now, and someone else (or nobody) was first before


def _precedes(left: Sequence[Any], right: Sequence[Any]) -> ColumnElement[bool]:
    """``left < right`` in lexicographic order, spelled out (not a row value) so the planner
    can use the leading column's index range on both databases."""
    head, *tail = zip(left, right, strict=True)
    if not tail:
        return cast(ColumnElement[bool], head[0] < head[1])
    rest = _precedes([a for a, _ in tail], [b for _, b in tail])
    return or_(head[0] < head[1], and_(head[0] == head[1], rest))


def _not_banned() -> ColumnElement[bool]:
    """A filter on BestScore alone: the few banned ids are read once, through ix_user_banned,
    so ranking and counting read only the ranking index instead of joining every entry to its
    user."""
    banned = select(User.id).where(col(User.banned))
    return col(BestScore.user_id).not_in(banned)


def _on_board(leaderboard_id: int, gpu: str) -> ColumnElement[bool]:
    return and_(col(BestScore.leaderboard_id) == leaderboard_id, col(BestScore.gpu) == gpu)


def standings(
    session: Session, leaderboard_id: int, gpu: str, limit: int = 50, offset: int = 0
) -> list[Standing]:
    """The ranking of one (leaderboard, GPU), banned users left out; rank = offset + position.

    The page is cut on the ranking index first and only its rows are joined to their users, so
    a deep page costs an index walk, not a user lookup per skipped entry.
    """
    order = (col(BestScore.score), col(BestScore.submitted_at), col(BestScore.user_id))
    page = (
        select_rows(
            col(BestScore.user_id),
            col(BestScore.score),
            col(BestScore.submission_id),
            col(BestScore.submitted_at),
            col(BestScore.score_low),
            col(BestScore.score_high),
        )
        .where(_on_board(leaderboard_id, gpu), _not_banned())
        .order_by(*order)
        .limit(limit)
        .offset(offset)
        .subquery()
    )
    query = (
        select_rows(
            page.c.user_id,
            col(User.display_name),
            page.c.score,
            page.c.submission_id,
            page.c.submitted_at,
            page.c.score_low,
            page.c.score_high,
        )
        .join(User, col(User.id) == page.c.user_id)
        .order_by(page.c.score, page.c.submitted_at, page.c.user_id)
    )
    return [
        Standing(offset + place, user_id, name, score, submission_id, submitted_at, low, high)
        for place, (user_id, name, score, submission_id, submitted_at, low, high) in enumerate(
            session.execute(query), start=1
        )
    ]


def competition_ranks(ranges: Sequence[tuple[float, float] | None], first: int = 1) -> list[tuple[int, bool]]:
    """(rank, tied) for entries in ranking order, given each one's noise range (None: unknown).

    Competition ranks (1, 1, 3): an entry whose range reaches its group leader's shares the
    leader's rank, and both are marked tied. Comparing with the leader, not the neighbour, keeps
    a chain of small steps from tying first and last. An entry without a range ties no one.
    """
    out: list[tuple[int, bool]] = []
    leader: int | None = None  # index into out of the current group's leader
    for position, span in enumerate(ranges):
        lead = ranges[leader] if leader is not None else None
        if leader is not None and span is not None and lead is not None and span[0] <= lead[1]:
            out.append((out[leader][0], True))
            out[leader] = (out[leader][0], True)
        else:
            out.append((first + position, False))
            leader = position
    return out


def tie_labels(entries: Sequence[Standing]) -> list[str]:
    """Each entry's rank as shown: ``"2="`` where it is a tie within noise with its neighbours."""
    ranges = [
        (e.score_low, e.score_high) if e.score_low is not None and e.score_high is not None else None
        for e in entries
    ]
    first = entries[0].rank if entries else 1
    return [f"{rank}=" if tied else str(rank) for rank, tied in competition_ranks(ranges, first)]


def rank_of(session: Session, leaderboard_id: int, gpu: str, user_id: int) -> int | None:
    """The user's place in ``standings``, counted on the index; None without a (visible) entry."""
    mine = session.exec(
        select(BestScore.score, BestScore.submitted_at).where(
            _on_board(leaderboard_id, gpu), col(BestScore.user_id) == user_id, _not_banned()
        )
    ).first()
    if mine is None:
        return None
    score, submitted_at = mine
    ahead = session.exec(
        select(func.count())
        .select_from(BestScore)
        .where(
            _on_board(leaderboard_id, gpu),
            col(BestScore.score) <= score,
            _precedes(
                (col(BestScore.score), col(BestScore.submitted_at), col(BestScore.user_id)),
                (score, submitted_at, user_id),
            ),
            _not_banned(),
        )
    ).one()
    return int(ahead) + 1


def entry_counts(session: Session, leaderboard_ids: Iterable[int]) -> dict[int, int]:
    """Ranked entries per leaderboard (one per user and GPU, banned users left out)."""
    ids = list(leaderboard_ids)
    counts = dict.fromkeys(ids, 0)
    if not ids:
        return counts
    rows = session.exec(
        select(BestScore.leaderboard_id, func.count())
        .where(col(BestScore.leaderboard_id).in_(ids), _not_banned())
        .group_by(col(BestScore.leaderboard_id))
    )
    counts.update({board: int(count) for board, count in rows})
    return counts


def record_run(session: Session, run: Run) -> RankChange | None:
    """Fold a just-added run into ``BestScore``; the change of rank when the entry improved.

    Call it in the transaction that adds the run, so the run and the index commit together.
    Concurrent runs of one user are safe: on PostgreSQL an advisory lock per entry serialises
    them (so ``old_rank`` is what it was, not a guess), and the upsert only ever replaces a
    worse entry, so the better score wins whatever else writes. On SQLite the run's INSERT
    already holds the database's single write lock.
    """
    if run.mode != Mode.RANKED or not run.passed or run.score is None:
        return None
    session.flush()  # gives the run its id; on SQLite, takes the write lock before any read
    if run.id is None:
        raise ValueError("record_run needs a run added to this session")
    board, gpu, user_id = run.leaderboard_id, run.gpu, run.user_id
    _lock_entry(session, board, gpu, user_id)
    submitted_at, withdrawn_at = session.exec(
        select(Submission.created_at, Submission.withdrawn_at).where(col(Submission.id) == run.submission_id)
    ).one()
    if withdrawn_at is not None:
        return None  # withdrawn while it ran: its runs never rank
    old = session.exec(
        select(BestScore.score, BestScore.submitted_at, BestScore.run_id).where(
            _on_board(board, gpu), col(BestScore.user_id) == user_id
        )
    ).first()
    if old is not None and tuple(old) <= (run.score, submitted_at, run.id):
        return None
    old_rank = rank_of(session, board, gpu, user_id) if old is not None else None
    leaders = standings(session, board, gpu, limit=1)
    previous_leader = leaders[0].user_id if leaders else None

    values = {
        "leaderboard_id": board,
        "gpu": gpu,
        "user_id": user_id,
        "run_id": run.id,
        "submission_id": run.submission_id,
        "score": run.score,
        "score_low": run.score_low,
        "score_high": run.score_high,
        "submitted_at": submitted_at,
    }
    if not _upsert_if_better(session, values):
        return None  # something else stored a better run meanwhile
    new_rank = rank_of(session, board, gpu, user_id)
    if new_rank is None:
        return None  # banned: the entry is kept (an unban restores it) but not shown
    return RankChange(
        old_rank=old_rank,
        new_rank=new_rank,
        previous_leader_user_id=previous_leader,
        is_new_leader=new_rank == 1 and previous_leader != user_id,
    )


def _lock_entry(session: Session, leaderboard_id: int, gpu: str, user_id: int) -> None:
    """On PostgreSQL, serialise the writers of one entry until the transaction ends (SQLite's
    single write lock already does)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:space, hashtext(:entry))"),
            {"space": _LOCK_SPACE, "entry": f"{leaderboard_id}/{gpu}/{user_id}"},
        )


def _upsert_if_better(session: Session, values: dict[str, Any]) -> bool:
    """INSERT ... ON CONFLICT DO UPDATE WHERE better: the database itself keeps the minimum."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        pg = postgresql.insert(_BEST).values(values)
        statement: Any = pg.on_conflict_do_update(
            index_elements=_KEY, set_=_replacement(pg.excluded), where=_better(pg.excluded)
        )
    elif dialect == "sqlite":
        lite = sqlite.insert(_BEST).values(values)
        statement = lite.on_conflict_do_update(
            index_elements=_KEY, set_=_replacement(lite.excluded), where=_better(lite.excluded)
        )
    else:
        raise NotImplementedError(f"no upsert for {dialect}")
    return session.execute(statement.returning(_BEST.c.id)).first() is not None


def _replacement(excluded: Any) -> dict[str, Any]:
    return {
        name: excluded[name]
        for name in ("run_id", "submission_id", "score", "score_low", "score_high", "submitted_at")
    }


def _better(excluded: Any) -> ColumnElement[bool]:
    order = ("score", "submitted_at", "run_id")
    return _precedes([excluded[name] for name in order], [_BEST.c[name] for name in order])


def rebuild_best(session: Session, leaderboard_id: int) -> int:
    """Recompute a leaderboard's ``BestScore`` from its runs (admin repair; the tests' oracle).

    Returns the number of entries. On PostgreSQL the table is locked against writers for the
    duration, so a run recorded meanwhile waits and then folds in on top of the rebuilt index.
    """
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("LOCK TABLE bestscore IN SHARE ROW EXCLUSIVE MODE"))
    session.execute(delete(BestScore).where(col(BestScore.leaderboard_id) == leaderboard_id))
    candidates = _best_runs(col(Run.leaderboard_id) == leaderboard_id)
    best = select(*(candidates.c[name] for name in _COLUMNS)).where(candidates.c.place == 1)
    session.execute(insert(_BEST).from_select(_COLUMNS, best))
    counted = session.exec(
        select(func.count())
        .select_from(BestScore)
        .where(col(BestScore.leaderboard_id) == leaderboard_id)
    ).one()
    return int(counted)


def rebuild_entry(session: Session, leaderboard_id: int, gpu: str, user_id: int) -> None:
    """Recompute one user's entry on one (leaderboard, GPU) from their runs: after one of their
    submissions was withdrawn, the next best run (or none) takes its place."""
    _lock_entry(session, leaderboard_id, gpu, user_id)
    session.execute(delete(BestScore).where(_on_board(leaderboard_id, gpu), col(BestScore.user_id) == user_id))
    candidates = _best_runs(
        col(Run.leaderboard_id) == leaderboard_id, col(Run.gpu) == gpu, col(Run.user_id) == user_id
    )
    best = select(*(candidates.c[name] for name in _COLUMNS)).where(candidates.c.place == 1)
    session.execute(insert(_BEST).from_select(_COLUMNS, best))


_COLUMNS = [*_KEY, "run_id", "submission_id", "score", "score_low", "score_high", "submitted_at"]


def _best_runs(*where: ColumnElement[bool]) -> Any:
    """The ranked, passing runs of submissions not withdrawn, each numbered by its place among
    its author's runs on that GPU (``place == 1``: the run their entry holds)."""
    place = (
        func.row_number()
        .over(
            partition_by=(col(Run.gpu), col(Run.user_id)),
            order_by=(col(Run.score), col(Submission.created_at), col(Run.id)),
        )
        .label("place")
    )
    return (
        select_rows(
            col(Run.leaderboard_id).label("leaderboard_id"),
            col(Run.gpu).label("gpu"),
            col(Run.user_id).label("user_id"),
            col(Run.id).label("run_id"),
            col(Run.submission_id).label("submission_id"),
            col(Run.score).label("score"),
            col(Run.score_low).label("score_low"),
            col(Run.score_high).label("score_high"),
            col(Submission.created_at).label("submitted_at"),
            place,
        )
        .join(Submission, col(Submission.id) == col(Run.submission_id))
        .where(
            *where,
            col(Run.mode) == Mode.RANKED.value,
            col(Run.passed),
            col(Run.score).is_not(None),
            col(Submission.withdrawn_at).is_(None),
        )
        .subquery()
    )
