"""The GPU script's repeatability set (bench/gpu/repeat) stays correct: every solution passes.

The set's leaderboards exist to be ranked twice on a GPU (issue #14); here each honest solution
runs in ``test`` mode through the real harness on the CPU, on its tests and its smallest
benchmark case, so a broken reference, generator or solution shows up in CI rather than on a GPU
lease.
"""

from __future__ import annotations

import pytest
from conftest import REPO, HarnessRun, leaderboard_spec, run_many

from kernelcup.harness.spec import JobSpec, Mode, Status

REPEAT_SET = REPO / "bench" / "gpu" / "repeat"
FOLDERS = sorted(p for p in REPEAT_SET.iterdir() if (p / "task.yml").is_file())
SOLUTIONS = [path for folder in FOLDERS for path in sorted((folder / "solutions").glob("*.py"))]


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[HarnessRun, JobSpec]]:
    specs = {}
    for path in SOLUTIONS:
        folder = path.parent.parent
        spec = leaderboard_spec(folder, path.read_text(), Mode.TEST, timeout_s=120)
        # Its tests and its smallest benchmark case, checked in one job: one process per board
        # (a torch.compile solution compiles afresh in each process).
        spec.task.tests = [*spec.task.tests, *spec.task.benchmarks[:1]]
        specs[folder.name] = spec
    batch: dict[str, HarnessRun] = run_many(specs)
    return {name: (batch[name], specs[name]) for name in specs}


def test_the_set_has_every_pattern_issue_14_names() -> None:
    assert {f.name for f in FOLDERS} == {
        "launches", "pylist_weights", "bincount_sync", "item_normalize", "tiny_add", "scatter_atomics",
        "compiled_sort", "graph_launches",
    }
    assert len(SOLUTIONS) == len(FOLDERS)


@pytest.mark.parametrize("folder", [f.name for f in FOLDERS])
def test_each_solution_of_the_set_passes_its_tests_and_smallest_benchmark_case(
    runs: dict[str, tuple[HarnessRun, JobSpec]], folder: str
) -> None:
    run, spec = runs[folder]
    result = run.outcome()
    assert result.status is Status.PASSED, result.verdict
    assert len(result.tests) == len(spec.task.tests) and all(case.passed for case in result.tests)
