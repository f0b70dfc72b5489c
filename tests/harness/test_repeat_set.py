"""The GPU script's repeatability set (bench/gpu/repeat) stays correct: every solution passes.

The set's leaderboards exist to be ranked twice on a GPU (issue #14); here each honest solution
runs in ``test`` mode through the real harness on the CPU, and in ``benchmark`` mode on the
smallest case, so a broken reference or solution shows up in CI rather than on a GPU lease.
"""

from __future__ import annotations

import pytest
from conftest import REPO, HarnessRun, leaderboard_spec, run_many

from kernelcup.harness.spec import Mode, Status

REPEAT_SET = REPO / "bench" / "gpu" / "repeat"
FOLDERS = sorted(p for p in REPEAT_SET.iterdir() if (p / "task.yml").is_file())
SOLUTIONS = [path for folder in FOLDERS for path in sorted((folder / "solutions").glob("*.py"))]


@pytest.fixture(scope="module")
def runs() -> dict[str, HarnessRun]:
    specs = {}
    for path in SOLUTIONS:
        folder = path.parent.parent
        specs[f"test/{folder.name}"] = leaderboard_spec(folder, path.read_text(), Mode.TEST, timeout_s=120)
        benchmark = leaderboard_spec(folder, path.read_text(), Mode.BENCHMARK, timeout_s=120)
        benchmark.task.benchmarks = benchmark.task.benchmarks[:1]  # the smallest: CPU time stays short
        specs[f"benchmark/{folder.name}"] = benchmark
    batch: dict[str, HarnessRun] = run_many(specs)
    return batch


def test_the_set_has_every_pattern_issue_14_names() -> None:
    assert {f.name for f in FOLDERS} == {
        "launches", "pylist_weights", "bincount_sync", "item_normalize", "tiny_add", "scatter_atomics",
        "compiled_sort", "graph_launches",
    }
    assert len(SOLUTIONS) == len(FOLDERS)


@pytest.mark.parametrize("folder", [f.name for f in FOLDERS])
@pytest.mark.parametrize("mode", ["test", "benchmark"])
def test_each_solution_of_the_set_passes(runs: dict[str, HarnessRun], folder: str, mode: str) -> None:
    result = runs[f"{mode}/{folder}"].outcome()
    assert result.status is Status.PASSED, result.verdict
