"""The GPU script's repeatability set (bench/gpu/repeat) stays correct: every solution passes.

The set's leaderboards exist to be ranked twice on a GPU (issue #14); here each honest solution
runs in ``test`` mode through the real harness on the CPU, and in ``benchmark`` mode on the
smallest case, so a broken reference or solution shows up in CI rather than on a GPU lease.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import REPO, HarnessRun, leaderboard_spec, run_many

from harness.spec import Mode, Status

REPEAT_SET = REPO / "bench" / "gpu" / "repeat"
FOLDERS = sorted(p for p in REPEAT_SET.iterdir() if (p / "task.yml").is_file())
SOLUTIONS = [path for folder in FOLDERS for path in sorted((folder / "solutions").glob("*.py"))]


def _smallest_benchmark(folder: Path) -> dict[str, Any]:
    """The task with only its first benchmark, the smallest (CPU time stays short)."""
    task: dict[str, Any] = yaml.safe_load((folder / "task.yml").read_text())
    task["benchmarks"] = task["benchmarks"][:1]
    return task


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HarnessRun]:
    specs = {}
    for path in SOLUTIONS:
        folder = path.parent.parent
        specs[f"test/{folder.name}"] = leaderboard_spec(folder, path.read_text(), Mode.TEST, timeout_s=120)
        small = tmp_path_factory.mktemp(folder.name)
        for source in folder.iterdir():
            if source.is_file():
                (small / source.name).write_text(source.read_text())
        (small / "task.yml").write_text(yaml.safe_dump(_smallest_benchmark(folder)))
        specs[f"benchmark/{folder.name}"] = leaderboard_spec(small, path.read_text(), Mode.BENCHMARK, timeout_s=120)
    batch: dict[str, HarnessRun] = run_many(specs)
    return batch


def test_the_set_has_every_pattern_issue_14_names() -> None:
    assert {f.name for f in FOLDERS} == {
        "launches", "pylist_weights", "bincount_sync", "item_normalize", "tiny_add", "scatter_atomics"
    }
    assert len(SOLUTIONS) == len(FOLDERS)


@pytest.mark.parametrize("folder", [f.name for f in FOLDERS])
@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_each_solution_of_the_set_passes(runs: dict[str, HarnessRun], folder: str, mode: str) -> None:
    result = runs[f"{mode}/{folder}"].outcome()
    assert result.status is Status.PASSED, result.verdict
