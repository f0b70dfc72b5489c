"""How long ``export`` takes on a season: 100,000 runs over several leaderboards, each run with
a realistic result (5 tests, 3 benchmarks with their statistics, ranges and round medians, the
GPU's clocks and versions), half the leaderboards closed so their code goes out too.

Loads the rows in bulk (bench.store's path), then times the export itself as ``export
--season`` runs it (``kernelcup.core.export``: rows read in batches, written with pyarrow), to
a Parquet file and to a datasets folder: wall time, rows per second, file size, peak memory.

Run: ``.venv/bin/python -m bench.export --db sqlite|postgres [--runs N --boards N --users N]
[--results bench/RESULTS-export.md]``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import random
import resource
import secrets
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import make_url
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import NullPool
from sqlmodel import SQLModel, text

import kernelcup.core.store.models  # noqa: F401  (registers the tables)
from kernelcup.core.export.files import dataset_zip, write_parquet
from kernelcup.core.export.runs import batches, boards_closing_in, pseudonym_key
from kernelcup.core.store.db import make_engine, session_scope, upgrade

START = datetime(2026, 1, 5, tzinfo=UTC)
NOW = datetime(2026, 9, 15, tzinfo=UTC)  # half the season's boards closed by then (their code is public)
GPUS = ("H100", "B200")
CODES = 500  # distinct sources, ~2 KB each
CHUNK = 10_000
DEFAULT_PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@dataclass(frozen=True)
class Outcome:
    database: str
    runs: int
    boards: int
    load_s: float
    parquet_s: float
    parquet_bytes: int
    dataset_s: float
    dataset_bytes: int
    peak_mb: float
    load_average: float


@contextmanager
def scratch_database(kind: str, pg_admin: str) -> Iterator[str]:
    """A new SQLite file, or a new PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="kc-export-") as folder:
            yield f"sqlite:///{folder}/bench.db"
        return
    name = f"kc_export_{os.getpid()}_{secrets.token_hex(4)}"
    admin = make_engine(pg_admin, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(pg_admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def bulk_insert(connection: Connection, table: str, columns: tuple[str, ...], rows: Iterable[tuple[Any, ...]]) -> None:
    """Executemany in chunks, through the columns' own bind processing."""
    statement = SQLModel.metadata.tables[table].insert()
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(dict(zip(columns, row, strict=True)))
        if len(chunk) == CHUNK:
            connection.execute(statement, chunk)
            chunk = []
    if chunk:
        connection.execute(statement, chunk)


def versions(url: str) -> str:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            if engine.dialect.name == "postgresql":
                return "PostgreSQL " + str(connection.execute(text("SHOW server_version")).scalar())
            return "SQLite " + str(connection.execute(text("SELECT sqlite_version()")).scalar())
    finally:
        engine.dispose()


def _source(i: int) -> str:
    body = "".join(f"    x{j} = data[{j % 7}] * {i + j}  # step {j}\n" for j in range(50))
    return f"import torch\n\n\ndef custom_kernel(data):\n{body}    return data\n"


def _result(rng: random.Random, passed: bool, score: float | None, gpu: str) -> str:
    tests = [{"case": {"size": 1024 << k, "seed": 1000 + k}, "passed": passed or k < 3, "message": ""}
             for k in range(5)]
    benchmarks = []
    for k in range(3 if passed else 0):
        median = (score or 1e-3) * 1e9 * (0.5 + k / 2)
        rounds = [median * rng.uniform(0.99, 1.01) for _ in range(3)]
        benchmarks.append({"case": {"size": 4096 << k, "seed": 2000 + k}, "passed": True, "message": "",
                           "runs": 100, "median_ns": median, "mean_ns": median * 1.01, "min_ns": median * 0.97,
                           "max_ns": median * 1.2, "std_ns": median * 0.02, "ci_low_ns": median * 0.995,
                           "ci_high_ns": median * 1.005, "gbps": 1.5e3, "tflops": None, "percent_of_peak": 44.0,
                           "round_median_ns": rounds})
    system = {"device": "cuda", "gpu": f"NVIDIA {gpu}", "driver": "580.65", "torch": "2.11.0", "cuda": "13.0",
              "triton": "3.6.0", "python": "3.12.3", "hostname": "runner-7", "sm_clock_mhz_before": 1980.0,
              "sm_clock_mhz_after": 1965.0, "sm_clock_mhz_min": 1755.0, "sm_clock_mhz_max": 1980.0,
              "memory_clock_mhz_min": 2619.0, "memory_clock_mhz_max": 2619.0, "gpu_temp_c_max": 61.0,
              "power_w_max": 412.0, "clock_limits": ["power cap"] if rng.random() < 0.1 else [],
              "isolation": "uid 65534 (nobody)"}
    return json.dumps({"version": 1, "job_id": "1", "mode": "ranked", "status": "passed" if passed else "failed",
                       "verdict": "all 5 tests passed" if passed else "test 4 of 5 failed: mismatch",
                       "tests": tests, "benchmarks": benchmarks, "score_s": score, "system": system})


def load(url: str, runs: int, boards: int, users: int) -> None:
    engine = make_engine(url, poolclass=NullPool)
    try:
        _load(engine, runs, boards, users)
    finally:
        engine.dispose()


def _load(engine: Engine, runs: int, boards: int, users: int) -> None:
    rng = random.Random(1)
    submissions = runs // len(GPUS)
    codes = [(hashlib.sha256(_source(i).encode()).hexdigest(), _source(i)) for i in range(CODES)]
    step = timedelta(days=300) / max(submissions, 1)
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SET LOCAL session_replication_role = replica"))
        else:
            connection.exec_driver_sql("PRAGMA foreign_keys = OFF")
        bulk_insert(connection, "user", ("id", "identity", "display_name", "banned", "named_in_exports",
                                         "created_at"),
                    ((u + 1, f"console:user{u}", f"user{u}", False, u % 10 == 0, START) for u in range(users)))
        bulk_insert(connection, "code", ("sha256", "content"), codes)
        # Deadlines 2026-06 .. 2027-03: those before NOW are closed, their code public.
        bulk_insert(connection, "leaderboard", ("id", "name", "description", "lang", "deadline", "ranking_by",
                                                "visibility", "task_json", "secret_seed", "paused", "created_at"),
                    [(b + 1, f"board{b}", "", "py", datetime(2026, 6 + 2 * b, 1, tzinfo=UTC)
                      if 6 + 2 * b <= 12 else datetime(2027, 6 + 2 * b - 12, 1, tzinfo=UTC),
                      "geom", "public", "{}", 7, False, START) for b in range(boards)])
        board_of = [s % boards + 1 for s in range(submissions)]
        owner = [rng.randrange(users) + 1 for _ in range(submissions)]
        bulk_insert(connection, "submission", ("id", "leaderboard_id", "user_id", "code_sha256", "file_name", "mode",
                                               "created_at"),
                    ((s + 1, board_of[s], owner[s], codes[s % CODES][0], "submission.py", "ranked", START + step * s)
                     for s in range(submissions)))
        bulk_insert(connection, "job", ("id", "submission_id", "gpu", "runner", "status", "attempts", "queued_at"),
                    ((s * len(GPUS) + g + 1, s + 1, gpu, "modal", "succeeded", 1, START + step * s)
                     for s in range(submissions) for g, gpu in enumerate(GPUS)))

        def run_rows() -> Iterator[tuple[Any, ...]]:
            for s in range(submissions):
                for g, gpu in enumerate(GPUS):
                    passed = rng.random() < 0.9
                    score = rng.uniform(1e-4, 1e-2) if passed else None
                    low, high = (score * 0.995, score * 1.005) if score is not None else (None, None)
                    yield (s * len(GPUS) + g + 1, s * len(GPUS) + g + 1, s + 1, board_of[s], owner[s], gpu,
                           "ranked", passed, score, low, high, _result(rng, passed, score, gpu), "{}",
                           START + step * s)

        bulk_insert(connection, "run", ("id", "job_id", "submission_id", "leaderboard_id", "user_id", "gpu", "mode",
                                        "passed", "score", "score_low", "score_high", "result_json", "system_json",
                                        "created_at"), run_rows())
    with engine.begin() as connection:
        connection.execute(text("ANALYZE"))


def export_once(engine: Engine, dataset: bool) -> tuple[float, int]:
    """The export of the 2026 season, as ``export --season 2026`` runs it; seconds and bytes."""
    started = time.perf_counter()
    with session_scope(engine) as session:
        boards = boards_closing_in(session, datetime(2026, 1, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC),
                                   NOW, True)
        rows = batches(session, boards, pseudonym_key(session))
        if dataset:
            size = len(dataset_zip(rows, "kernelcup-season-2026", [b.name for b in boards], NOW))
        else:
            sink = io.BytesIO()  # in memory, as the command's reply holds it
            write_parquet(rows, sink)
            size = sink.tell()
    return time.perf_counter() - started, size


def bench(kind: str, runs: int, boards: int, users: int, pg_admin: str) -> Outcome:
    with scratch_database(kind, pg_admin) as url:
        upgrade(url)
        started = time.perf_counter()
        load(url, runs, boards, users)
        load_s = time.perf_counter() - started
        engine = make_engine(url)
        try:
            with session_scope(engine) as session:
                season = boards_closing_in(session, datetime(2026, 1, 1, tzinfo=UTC),
                                           datetime(2027, 1, 1, tzinfo=UTC), NOW, True)
                exported = sum(len(batch) for batch in batches(session, season, pseudonym_key(session)))
            parquet_s, parquet_bytes = export_once(engine, False)
            dataset_s, dataset_bytes = export_once(engine, True)
        finally:
            engine.dispose()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return Outcome(kind, exported, len(season), load_s, parquet_s, parquet_bytes, dataset_s, dataset_bytes, peak,
                   os.getloadavg()[0])


def section(outcome: Outcome, database: str) -> str:
    rate = outcome.runs / outcome.parquet_s if outcome.parquet_s else 0.0
    return (
        f"## {outcome.database}\n\n"
        f"{database}, {date.today().isoformat()}; {os.cpu_count()} cores "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}, "
        f"1-minute load average {outcome.load_average:.1f} at the end.\n\n"
        f"The season: {outcome.runs:,} runs on {outcome.boards} leaderboards (bulk load {outcome.load_s:.1f} s).\n\n"
        "| export of the season | seconds | runs per second | size |\n|---|---:|---:|---:|\n"
        f"| Parquet (zstd) | {outcome.parquet_s:.1f} | {rate:,.0f} | {outcome.parquet_bytes / 2**20:.1f} MiB |\n"
        f"| datasets folder (zipped) | {outcome.dataset_s:.1f} | "
        f"{outcome.runs / outcome.dataset_s if outcome.dataset_s else 0:,.0f} | "
        f"{outcome.dataset_bytes / 2**20:.1f} MiB |\n\n"
        f"Peak memory of the process (load and both exports): {outcome.peak_mb:,.0f} MiB.\n"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.export", description=__doc__)
    parser.add_argument("--db", choices=("sqlite", "postgres"), required=True)
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the season (plus one board after it)")
    parser.add_argument("--boards", type=int, default=4, help="leaderboards closing in 2026 (one more closes in 2027)")
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--pg-admin-url", default=DEFAULT_PG_ADMIN)
    parser.add_argument("--results", type=Path, help="append the figures to this markdown file")
    args = parser.parse_args(argv)
    # One more leaderboard than the season holds, closing in 2027: the season's query must skip it.
    total_boards = args.boards + 1
    runs = args.runs * total_boards // args.boards
    outcome = bench(args.db, runs, total_boards, args.users, args.pg_admin_url)
    text_ = section(outcome, versions(args.pg_admin_url if args.db == "postgres" else "sqlite://"))
    print(text_)
    if args.results:
        existing = args.results.read_text() if args.results.exists() else "# Export benchmark\n\n"
        args.results.write_text(existing.rstrip() + "\n\n" + text_)


if __name__ == "__main__":
    main()
