"""bench/store.py still runs: the same code path as the 1,000,000-run figures, at 10,000."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_store_benchmark_runs_small(
    database: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if database == "postgres":
        request.getfixturevalue("postgres_admin_url")  # skips, or fails under CI, without it
    results = tmp_path / "RESULTS-store.md"
    command = [sys.executable, "-m", "bench.store", "--db", database, "--runs", "10000",
               "--users", "200", "--calls", "5", "--results", str(results)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "| show: standings top 50 + rank_of |" in done.stdout
    written = results.read_text()
    assert written.startswith("# Store benchmark")
    assert f"## {database}" in written
    assert "10,000 runs from 200 users" in written
