"""``kernelcup admin export`` and ``publish-name`` from the terminal: a real process on a real database."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from tests.terminal.test_cli import ROOT, kernelcup


def test_the_cli_exports_a_leaderboards_runs_as_parquet_naming_those_who_opted_in(tmp_path: Path) -> None:
    submitted = kernelcup(tmp_path, "submit", "test", str(ROOT / "leaderboards/identity/solutions/pytorch.py"))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    named = kernelcup(tmp_path, "publish-name", "on")
    assert named.returncode == 0 and "name you as tester" in named.stdout, named.stdout + named.stderr
    exported = kernelcup(tmp_path, "admin", "export", "identity")
    assert exported.returncode == 0, exported.stdout + exported.stderr
    [written] = list(tmp_path.rglob("kernelcup-identity.parquet"))
    rows = pq.read_table(written).to_pylist()
    assert [(r["leaderboard"], r["user"], r["mode"], r["passed"]) for r in rows] == [("identity", "tester", "test",
                                                                                       True)]
    assert rows[0]["system_device"] == "cpu" and rows[0]["tests"]
