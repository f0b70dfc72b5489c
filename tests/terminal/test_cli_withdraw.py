"""``kernelcup withdraw ID`` from the terminal: a real process on a real database."""

from __future__ import annotations

import re
from pathlib import Path

from tests.terminal.test_cli import ROOT, kernelcup


def test_the_cli_withdraws_ones_own_submission_and_mine_says_so(tmp_path: Path) -> None:
    submitted = kernelcup(tmp_path, "submit", "test", str(ROOT / "leaderboards/identity/solutions/pytorch.py"))
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    found = re.search(r"Submission #(\d+)", submitted.stdout)
    assert found, submitted.stdout
    withdrawn = kernelcup(tmp_path, "withdraw", found.group(1))
    assert withdrawn.returncode == 0, withdrawn.stdout + withdrawn.stderr
    assert f"Submission #{found.group(1)} is withdrawn" in withdrawn.stdout
    mine = kernelcup(tmp_path, "mine")
    assert "withdrawn;" in mine.stdout
    again = kernelcup(tmp_path, "withdraw", found.group(1))
    assert again.returncode == 1 and "already withdrawn" in again.stdout + again.stderr
