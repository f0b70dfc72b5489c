"""Every shipped leaderboard, end to end through the real harness on the CPU.

Each solution in ``leaderboards/<name>/solutions`` states what it expects in its header
(``# expect: pass`` or ``# expect: fail``; ``# requires: cuda`` for Triton and inline CUDA,
which need a GPU and are skipped here). Python solutions run in ``test`` mode and must get
the verdict they expect; CUDA leaderboards' solutions must build with nvcc (nothing CUDA runs
on the CPU). One leaderboard also runs in ``benchmark`` and ``ranked`` mode, with its test
cases standing in for benchmarks sized for a GPU.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, HarnessRun, leaderboard_spec, run_many

from kernelcup.harness.spec import JobSpec, Mode, Status

SHIPPED = REPO / "leaderboards"
HEADER = re.compile(r"^\s*(?:#|//)\s*(expect|requires):\s*(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Solution:
    leaderboard: str
    path: Path
    expect: str
    requires_cuda: bool
    lang: str

    @property
    def name(self) -> str:
        return f"{self.leaderboard}/{self.path.name}"


def _solutions() -> list[Solution]:
    found: list[Solution] = []
    if not SHIPPED.is_dir():
        return found
    for folder in sorted(p for p in SHIPPED.iterdir() if (p / "task.yml").is_file()):
        lang = "cu" if re.search(r"^lang:\s*cu\b", (folder / "task.yml").read_text(), re.M) else "py"
        for path in sorted((folder / "solutions").glob("*")):
            if path.suffix not in (".py", ".cu"):
                continue
            headers = dict(HEADER.findall(path.read_text()))
            found.append(
                Solution(
                    folder.name,
                    path,
                    headers.get("expect", "pass"),
                    headers.get("requires") == "cuda",
                    lang,
                )
            )
    return found


SOLUTIONS = _solutions()
RUNNABLE = [s for s in SOLUTIONS if s.lang == "py" and not s.requires_cuda]
# One build per CUDA leaderboard proves its driver builds the way the harness builds it (each
# nvcc run costs ~10 s of CPU; the other solutions differ only in the kernel).
BUILDABLE = (
    list({s.leaderboard: s for s in reversed(SOLUTIONS) if s.lang == "cu" and s.expect == "pass"}.values())
    if shutil.which("nvcc")
    else []
)


def _spec(solution: Solution, mode: Mode = Mode.TEST) -> JobSpec:
    folder = SHIPPED / solution.leaderboard
    spec: JobSpec = leaderboard_spec(folder, solution.path.read_text(), mode, timeout_s=120)
    return spec


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, HarnessRun]:
    specs = {s.name: _spec(s) for s in RUNNABLE + BUILDABLE}
    cache = tmp_path_factory.mktemp("cache")
    from conftest import run_harness

    batch: dict[str, HarnessRun] = {}
    if specs:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {
                name: pool.submit(run_harness, spec, env={"KERNELCUP_CACHE_DIR": str(cache)})
                for name, spec in specs.items()
            }
            batch = {name: future.result() for name, future in futures.items()}
    return batch


@pytest.mark.skipif(not RUNNABLE, reason="no shipped leaderboards yet")
@pytest.mark.parametrize("solution", RUNNABLE, ids=lambda s: s.name)
def test_a_python_solution_gets_the_verdict_it_expects(solution: Solution, runs: dict[str, HarnessRun]) -> None:
    result = runs[solution.name].outcome()
    if solution.expect == "pass":
        assert result.status is Status.PASSED, result.verdict
    else:
        assert result.status is Status.FAILED, result.verdict
        assert result.verdict.startswith("test ")


@pytest.mark.skipif(not BUILDABLE, reason="no CUDA leaderboards shipped, or no nvcc")
@pytest.mark.parametrize("solution", BUILDABLE, ids=lambda s: s.name)
def test_a_cuda_solution_builds(solution: Solution, runs: dict[str, HarnessRun]) -> None:
    result = runs[solution.name].outcome()
    assert result.status is Status.ERROR, result.verdict
    assert result.verdict.startswith("compiled;"), result.compile_log[-2000:]


def _benchmarkable() -> Solution | None:
    preferred = sorted(RUNNABLE, key=lambda s: (s.leaderboard != "vectoradd", s.name))
    return next((s for s in preferred if s.expect == "pass"), None)


@pytest.mark.skipif(_benchmarkable() is None, reason="no passing CPU solution shipped yet")
@pytest.mark.parametrize("mode", [Mode.BENCHMARK, Mode.RANKED])
def test_a_shipped_leaderboard_benchmarks_and_ranks_on_the_cpu(mode: Mode) -> None:
    solution = _benchmarkable()
    assert solution is not None
    spec = _spec(solution, mode)
    spec.task.benchmarks = spec.task.tests[-2:]  # GPU-sized benchmarks would take minutes here
    if mode is Mode.RANKED:
        spec.secret_seed = 271828182845904523536
    result = run_many({"one": spec})["one"].outcome()
    assert result.status is Status.PASSED, result.verdict
    assert result.score_s is not None and len(result.benchmarks) == len(spec.task.benchmarks)
