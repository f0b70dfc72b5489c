"""How fast ``show`` stays on a big leaderboard: 1,000,000 runs from 10,000 users.

Loads the runs in bulk (executemany on SQLite, COPY on PostgreSQL), derives ``BestScore`` with
``rebuild_best``, then times what the commands do: ``standings`` top 50 with ``rank_of`` (the
figure with a 50 ms target), a deep page, ``entry_counts`` and ``record_run`` of an improving
run. Each call gets its own session, as a command does.

Run: ``.venv/bin/python -m bench.store --db sqlite|postgres [--runs N --users N]
[--results bench/RESULTS-store.md]``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import platform
import random
import secrets
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Table, make_url, text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool
from sqlmodel import Session, SQLModel

import kernelcup.core.store.models  # noqa: F401  (registers the tables)
from kernelcup.core.leaderboards.ranking import entry_counts, rank_of, rebuild_best, record_run, standings, tie_labels
from kernelcup.core.store.db import make_engine, session_scope, upgrade
from kernelcup.core.store.models import Job, Run, Submission

GPUS = ("H100", "B200")
START = datetime(2026, 9, 1, tzinfo=UTC)
SOURCE = "def custom_kernel(data):\n    return data\n"
SHA = hashlib.sha256(SOURCE.encode()).hexdigest()
CHUNK = 50_000
DEFAULT_PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@dataclass(frozen=True)
class Timing:
    name: str
    median_ms: float
    p95_ms: float


@dataclass(frozen=True)
class Outcome:
    database: str
    runs: int
    users: int
    entries: int
    load_s: float
    rebuild_s: float
    timings: list[Timing]
    load_average: float  # of the machine while the queries were timed


@contextmanager
def scratch_database(kind: str, pg_admin: str) -> Iterator[str]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="kc-bench-") as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    name = f"kc_bench_{os.getpid()}_{secrets.token_hex(4)}"
    admin = make_engine(pg_admin, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(pg_admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _table(name: str) -> Table:
    return SQLModel.metadata.tables[name]


def bulk_insert(
    connection: Connection, table_name: str, columns: Sequence[str], rows: Iterable[tuple[Any, ...]]
) -> None:
    """The fastest path each driver has; values go through the columns' own bind processing on
    SQLite, so dates are stored exactly as the ORM stores them."""
    table = _table(table_name)
    driver = connection.connection.driver_connection
    assert driver is not None
    quoted = ", ".join(f'"{name}"' for name in columns)
    if connection.dialect.name == "postgresql":
        copy_in = f'COPY "{table_name}" ({quoted}) FROM STDIN'
        with driver.cursor() as cursor, cursor.copy(copy_in) as copy:
            for row in rows:
                copy.write_row(row)
        return
    # The default 2 MB page cache makes every random index insert a read from disk.
    connection.exec_driver_sql("PRAGMA cache_size = -262144")
    processors = [table.c[name].type.bind_processor(connection.dialect) for name in columns]
    statement = f'INSERT INTO "{table_name}" ({quoted}) VALUES ({", ".join("?" * len(columns))})'
    cursor = driver.cursor()
    batch: list[tuple[Any, ...]] = []
    for row in rows:
        batch.append(
            tuple(p(v) if p else v for p, v in zip(processors, row, strict=True))
        )
        if len(batch) == CHUNK:
            cursor.executemany(statement, batch)
            batch.clear()
    cursor.executemany(statement, batch)
    cursor.close()


def load(url: str, runs: int, users: int, seed: int) -> int:
    """One leaderboard, ``runs`` runs over two GPUs: a submission per pair of jobs, 80% ranked,
    90% passing, scores drawn per user around a personal level so bests spread out."""
    engine = make_engine(url, poolclass=NullPool)  # its settings die with its one connection
    try:
        return _load(engine, runs, users, seed)
    finally:
        engine.dispose()


def _load(engine: Engine, runs: int, users: int, seed: int) -> int:
    rng = random.Random(seed)
    submissions = runs // len(GPUS)
    level = [rng.uniform(1e-4, 1e-2) for _ in range(users)]
    modes = ["ranked"] * 4 + ["benchmark"]
    owner = [rng.randrange(users) for _ in range(submissions)]
    mode_of = [rng.choice(modes) for _ in range(submissions)]
    step = timedelta(days=60) / max(submissions, 1)
    with engine.begin() as connection:
        # The rows are consistent by construction; checking four foreign keys per run row
        # would triple the load time and measures nothing that the queries below use.
        if connection.dialect.name == "postgresql":
            connection.execute(text("SET LOCAL session_replication_role = replica"))
        else:
            connection.exec_driver_sql("PRAGMA foreign_keys = OFF")  # before the first INSERT
        bulk_insert(
            connection,
            "user",
            ("id", "identity", "display_name", "banned", "created_at"),
            ((u + 1, f"console:user{u}", f"user{u}", u % 100 == 99, START) for u in range(users)),
        )
        bulk_insert(connection, "code", ("sha256", "content"), [(SHA, SOURCE)])
        bulk_insert(
            connection,
            "leaderboard",
            ("id", "name", "description", "lang", "deadline", "ranking_by", "visibility",
             "task_json", "secret_seed", "paused", "created_at"),
            [(1, "bench", "", "py", START + timedelta(days=90), "geom", "public", "{}", 7,
              False, START)],
        )
        bulk_insert(
            connection, "leaderboardgpu", ("id", "leaderboard_id", "gpu"),
            [(i + 1, 1, gpu) for i, gpu in enumerate(GPUS)],
        )
        bulk_insert(
            connection,
            "submission",
            ("id", "leaderboard_id", "user_id", "code_sha256", "file_name", "mode", "created_at"),
            (
                (s + 1, 1, owner[s] + 1, SHA, "submission.py", mode_of[s], START + step * s)
                for s in range(submissions)
            ),
        )
        job_rows = (
            (s * len(GPUS) + g + 1, s + 1, gpu, "modal", "succeeded", 1, START + step * s)
            for s in range(submissions)
            for g, gpu in enumerate(GPUS)
        )
        bulk_insert(
            connection, "job",
            ("id", "submission_id", "gpu", "runner", "status", "attempts", "queued_at"),
            job_rows,
        )

        def run_rows() -> Iterator[tuple[Any, ...]]:
            for s in range(submissions):
                for g, gpu in enumerate(GPUS):
                    passed = rng.random() < 0.9
                    score = level[owner[s]] * (1 + g) * rng.uniform(0.8, 1.5) if passed else None
                    # Each score with its noise range, as results carry one (~±0.5%).
                    low, high = (score * 0.995, score * 1.005) if score is not None else (None, None)
                    yield (s * len(GPUS) + g + 1, s * len(GPUS) + g + 1, s + 1, 1, owner[s] + 1,
                           gpu, mode_of[s], passed, score, low, high, "{}", "{}", START + step * s)

        bulk_insert(
            connection,
            "run",
            ("id", "job_id", "submission_id", "leaderboard_id", "user_id", "gpu", "mode",
             "passed", "score", "score_low", "score_high", "result_json", "system_json", "created_at"),
            run_rows(),
        )
        if connection.dialect.name == "postgresql":
            for name in ("user", "leaderboard", "leaderboardgpu", "submission", "job", "run"):
                connection.execute(
                    text(f"SELECT setval(pg_get_serial_sequence('\"{name}\"', 'id'), "
                         f"(SELECT max(id) FROM \"{name}\"))")
                )
    return submissions * len(GPUS)


def analyze(engine: Engine) -> None:
    if engine.dialect.name == "postgresql":
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE"))
    else:
        with engine.begin() as connection:
            connection.execute(text("ANALYZE"))


def timed(name: str, calls: int, call: Callable[[int], object]) -> Timing:
    for i in range(min(calls, 3)):
        call(i)  # warm the caches and the connection pool, as a running bot has them
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    return Timing(name, statistics.median(samples), p95)


def measure(engine: Engine, users: int, calls: int, seed: int) -> list[Timing]:
    rng = random.Random(seed)
    picks = [(rng.choice(GPUS), rng.randrange(users) + 1) for _ in range(calls)]
    record_leader = itertools.count(1)  # every recorded run beats the board: the longest path

    def show(i: int) -> None:
        gpu, user = picks[i]
        with Session(engine) as session:
            assert len(tie_labels(standings(session, 1, gpu, limit=50))) == 50
            rank_of(session, 1, gpu, user)

    def top(i: int) -> None:
        with Session(engine) as session:
            standings(session, 1, picks[i][0], limit=50)

    def rank(i: int) -> None:
        with Session(engine) as session:
            rank_of(session, 1, *picks[i])

    def deep_page(i: int) -> None:
        with Session(engine) as session:
            standings(session, 1, picks[i][0], limit=50, offset=5000)

    def counts(_: int) -> None:
        with Session(engine) as session:
            entry_counts(session, [1])

    def improve(i: int) -> None:
        gpu, user = picks[i]
        with session_scope(engine) as session:
            submission = Submission(leaderboard_id=1, user_id=user, code_sha256=SHA,
                                    file_name="submission.py", mode="ranked")
            session.add(submission)
            session.flush()
            assert submission.id is not None
            job = Job(submission_id=submission.id, gpu=gpu, runner="modal", status="succeeded")
            session.add(job)
            session.flush()
            assert job.id is not None
            run = Run(job_id=job.id, submission_id=submission.id, leaderboard_id=1, user_id=user,
                      gpu=gpu, mode="ranked", passed=True, score=(score := 1e-6 / next(record_leader)),
                      score_low=score * 0.995, score_high=score * 1.005, result_json="{}")
            session.add(run)
            record_run(session, run)

    return [
        timed("show: standings top 50 + rank_of", calls, show),
        timed("standings top 50", calls, top),
        timed("rank_of", calls, rank),
        timed("standings offset 5000", calls, deep_page),
        timed("entry_counts", calls, counts),
        timed("record_run (improving run, with its rows)", calls, improve),
    ]


def bench(kind: str, runs: int, users: int, calls: int, pg_admin: str) -> Outcome:
    with scratch_database(kind, pg_admin) as url:
        upgrade(url)
        engine = make_engine(url)
        try:
            started = time.perf_counter()
            loaded = load(url, runs, users, seed=1)
            load_s = time.perf_counter() - started
            started = time.perf_counter()
            with session_scope(engine) as session:
                entries = rebuild_best(session, 1)
            rebuild_s = time.perf_counter() - started
            analyze(engine)
            timings = measure(engine, users, calls, seed=2)
            load_average = os.getloadavg()[0]
        finally:
            engine.dispose()
    return Outcome(kind, loaded, users, entries, load_s, rebuild_s, timings, load_average)


def table(outcome: Outcome) -> str:
    lines = ["| operation | median (ms) | p95 (ms) |", "|---|---:|---:|"]
    lines += [f"| {t.name} | {t.median_ms:.2f} | {t.p95_ms:.2f} |" for t in outcome.timings]
    return "\n".join(lines)


def versions(engine_url: str) -> str:
    engine = make_engine(engine_url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                return "PostgreSQL " + str(connection.execute(text("SHOW server_version")).scalar())
            return "SQLite " + str(connection.execute(text("SELECT sqlite_version()")).scalar())
    finally:
        engine.dispose()


def section(outcome: Outcome, database: str, calls: int) -> str:
    return (
        f"## {outcome.database}\n\n"
        f"{database}, {date.today().isoformat()}; this dev box: {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}, "
        f"shared with other work (1-minute load average {outcome.load_average:.1f} at the "
        f"end of the timed calls).\n\n"
        f"{outcome.runs:,} runs from {outcome.users:,} users on {len(GPUS)} GPUs "
        f"({outcome.entries:,} BestScore entries); bulk load {outcome.load_s:.1f} s, "
        f"`rebuild_best` {outcome.rebuild_s:.1f} s; {calls} calls each, "
        f"a new session per call.\n\n{table(outcome)}\n"
    )


def write_results(path: Path, outcome: Outcome, text_: str) -> None:
    """Replace this database's section, keep the other's."""
    header = (
        "# Store benchmark\n\n`python -m bench.store --db sqlite|postgres "
        "--results bench/RESULTS-store.md`. Target: `show` (standings top 50 + rank_of) "
        "under 50 ms median on both databases.\n\n"
    )
    sections: dict[str, str] = {}
    if path.exists():
        for chunk in path.read_text().split("\n## ")[1:]:
            name = chunk.split("\n", 1)[0].strip()
            sections[name] = "## " + chunk.rstrip() + "\n"
    sections[outcome.database] = text_
    order = [name for name in ("sqlite", "postgres") if name in sections]
    path.write_text(header + "\n".join(sections[name] for name in order))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.store", description=__doc__)
    parser.add_argument("--db", choices=("sqlite", "postgres"), required=True)
    parser.add_argument("--runs", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--pg-admin-url", default=DEFAULT_PG_ADMIN,
                        help="a database to CREATE/DROP the scratch database from")
    parser.add_argument("--results", type=Path, help="write the figures into this markdown file")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcome = bench(args.db, args.runs, args.users, args.calls, args.pg_admin_url)
    database = versions(
        args.pg_admin_url if args.db == "postgres" else "sqlite://"
    )
    print(section(outcome, database, args.calls))
    print(f"total {time.perf_counter() - started:.1f} s")
    if args.results:
        write_results(args.results, outcome, section(outcome, database, args.calls))


if __name__ == "__main__":
    main()
