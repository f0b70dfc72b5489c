"""bench/export.py still runs: the same code path as the 100,000-run figures, at 2,000."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("database", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_the_export_benchmark_runs_small(database: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if database == "postgres":
        request.getfixturevalue("postgres_admin_url")  # skips, or fails under CI, without it
    results = tmp_path / "RESULTS-export.md"
    command = [sys.executable, "-m", "bench.export", "--db", database, "--runs", "2000", "--users", "100",
               "--results", str(results)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    written = results.read_text()
    assert f"## {database}" in written and "The season: 2,000 runs on 4 leaderboards" in written
    assert "| Parquet (zstd) |" in written
