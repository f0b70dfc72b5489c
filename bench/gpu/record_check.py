"""The hiding places and honest patterns of issue #36 on GPU MODE's ``vectoradd_py``, through
GPU MODE's own ``eval.py`` and kernelcup's harness side by side.

Each file of ``bench/gpu/record_cases/`` (the cheats and honest patterns of
``tests/compat/test_hiding_places.py``, written for vectoradd's ``(A, B, C)`` float16 N x N
inputs; the first line says ``# Cheat:`` or ``# Honest:``) and each shipped correct solution of
pmpp_v2's ``vectoradd_py`` runs through:

(a) GPU MODE's ``eval.py`` in its ``leaderboard`` mode (a secret seed, every call checked), and
    where that fails in its ``benchmark`` mode too (one check, then calls timed unchecked);
    it is handed every benchmark case (``--gpumode-cases all``), though GPU MODE's runner hands a
    problem ranked by its last case only that case (``--gpumode-cases last``);
(b) kernelcup's harness in ``ranked`` mode, the spec built as the local runner builds it.

The table (``record_check.md`` under ``$OUT``, default ``./gpu-out``, also printed) gives per
file GPU MODE's mean and kernelcup's median per case (GPU MODE's eval reports means, not
medians), kernelcup over GPU MODE on the largest case, each side's geometric mean (over the
cases both timed), kernelcup against its own ``add_once`` per case (the claim: no cheat below
1.00, but for noise where it hides only the add), and the status and case messages.
``record_check_runs.jsonl`` holds every run. One failure never stops the table; runs stop
starting once ``--budget-s`` is spent (the rest are marked skipped).

Prepare the problems and the core's wheels as ``gpumode_compat.py`` and ``wheels.sh`` say, then
on the GPU machine, carrying ``.device/reference-kernels`` and ``.whl``::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
    PYTHONPATH=/tmp/site python3 bench/gpu/record_check.py .device/reference-kernels --budget-s 540

A file costs ~1-2 minutes (GPU MODE's 16384 x 16384 case, kernelcup's rounds): split the files
over calls with ``--files`` (``add_once`` runs in every call). ``--list`` shows what would run;
``--device cpu`` tries the script's own parts on a machine without a GPU (every run then fails:
vectoradd makes its inputs on ``"cuda"``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import secrets
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import script_paths  # noqa: F401  (first: the repository on the path, and a YAML reader)

# isort: split
from gpumode_compat import (
    Budget,
    Problem,
    find_problems,
    gpu_info,
    gpumode_eval,
    kernelcup_run,
    problems_root,
    reference_version,
    short,
    solutions_of,
)

from kernelcup.harness.spec import GpuInfo, Mode

HERE = Path(__file__).resolve().parent
CASES = HERE / "record_cases"
PROBLEM_SET = "pmpp_v2"
PROBLEM = "vectoradd_py"
BASELINE = "add_once"


@dataclass
class Entry:
    """One file to run: a record case or a shipped solution."""

    name: str
    kind: str  # cheat, honest or shipped
    code: str


@dataclass
class Row:
    entry: Entry
    gpumode: dict[str, Any] = field(default_factory=dict)
    kernelcup: dict[str, Any] = field(default_factory=dict)
    note: str = ""


def record_cases(only: set[str]) -> list[Entry]:
    """The record cases, the baseline first (always: the "its add_once" column compares timings
    of one machine), then cheats, then honest patterns."""
    entries = []
    for path in sorted(CASES.glob("*.py.txt")):
        name = path.name.removesuffix(".py.txt")
        if only and name not in only and name != BASELINE:
            continue
        code = path.read_text()
        kind = "cheat" if code.startswith("# Cheat:") else "honest"
        entries.append(Entry(name, kind, code))
    return sorted(entries, key=lambda e: (e.name != BASELINE, e.kind != "cheat", e.name))


def shipped(problem: Problem, only: set[str]) -> list[Entry]:
    found = [Entry(label, "shipped", code) for label, code, _ in solutions_of(problem, with_wrong=False)]
    return [e for e in found if not only or e.name in only or Path(e.name).stem in only]


def every_case(problem: Problem) -> Problem:
    """The problem as GPU MODE's eval would get it were it ranked on every case."""
    assert problem.task is not None
    task = {**problem.task.task, "ranking_by": "geom"}
    return dataclasses.replace(problem, task=dataclasses.replace(problem.task, task=task))


# --- the runs -------------------------------------------------------------------------------


def gpumode_means(outcome: dict[str, Any], cases: int) -> list[float | None]:
    """GPU MODE's mean per benchmark case (ns), aligned to the last ``cases`` it was handed."""
    report = outcome.get("report") or {}
    handed = sum(1 for key in report if re.fullmatch(r"benchmark\.\d+\.spec", key))
    means: list[float | None] = [None] * cases
    for index in range(handed):
        value = report.get(f"benchmark.{index}.mean")
        if value is not None and cases - handed + index >= 0:
            means[cases - handed + index] = float(value)
    return means


def run_gpumode(problem: Problem, entry: Entry, args: Any, limit: float) -> dict[str, Any]:
    """GPU MODE's leaderboard mode, and its benchmark mode where that fails."""
    handed = every_case(problem) if args.gpumode_cases == "all" else problem
    board = gpumode_eval(handed, entry.code, "leaderboard", limit, args.device, seed=secrets.randbits(31))
    board["mode"] = "leaderboard"
    if board["passed"]:
        return board
    board["tried"] = "leaderboard: " + board["verdict"]
    again = gpumode_eval(handed, entry.code, "benchmark", limit, args.device)
    again.update(mode="benchmark", tried=board["tried"])
    return again


def kernelcup_cases(outcome: dict[str, Any]) -> tuple[list[float | None], list[str]]:
    """kernelcup's median per benchmark case (ns) and the cases' messages."""
    benchmarks = (outcome.get("result") or {}).get("benchmarks") or []
    medians = [case.get("median_ns") for case in benchmarks]
    messages = [f"case {i + 1}: {case['message']}" for i, case in enumerate(benchmarks) if case.get("message")]
    return medians, messages


class Runner:
    """Runs every entry through both evaluators within the budget."""

    def __init__(self, problem: Problem, args: Any, gpu: GpuInfo, out: Path) -> None:
        self.problem = problem
        self.args = args
        self.gpu = gpu
        self.budget = Budget(args.budget_s)
        self.log = (out / "record_check_runs.jsonl").open("a")
        self.env = {"KERNELCUP_CACHE_DIR": str(Path(tempfile.gettempdir()) / "kernelcup-gpu-cache")}

    def limit(self) -> float | None:
        left = self.budget.left()
        return min(self.args.run_cap_s, left - 10) if left > 30 else None

    def run(self, row: Row) -> None:
        """GPU MODE's eval, then kernelcup ranked; a failure of either side leaves the other."""
        for side in ("gpumode", "kernelcup"):
            limit = self.limit()
            if limit is None:
                row.note = f"{side} skipped: out of time budget"
                return
            try:
                if side == "gpumode":
                    row.gpumode = run_gpumode(self.problem, row.entry, self.args, limit)
                else:
                    row.kernelcup = kernelcup_run(
                        self.problem, row.entry.code, Mode.RANKED, self.args.device, self.gpu, limit, self.env
                    )
            except Exception:
                row.note = f"{side}: script error: " + short(traceback.format_exc().strip().splitlines()[-1])
                print(f"{row.entry.name} ({side}): {traceback.format_exc()}", file=sys.stderr)
                continue
            self.write(side, row.entry, row.gpumode if side == "gpumode" else row.kernelcup)

    def write(self, kind: str, entry: Entry, outcome: dict[str, Any]) -> None:
        self.log.write(json.dumps({"run": kind, "file": entry.name, **outcome}, default=str) + "\n")
        self.log.flush()


# --- the table ------------------------------------------------------------------------------


def micro(values: Sequence[float | None]) -> str:
    return " / ".join("–" if v is None else f"{v / 1e3:.2f}" for v in values)


def geomean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in present) / len(present)) if present else None


def ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.2f}" if top and bottom else ""


def cells(row: Row, cases: int, baseline: Sequence[float | None]) -> list[str]:
    gm = gpumode_means(row.gpumode, cases) if row.gpumode else [None] * cases
    kc, messages = kernelcup_cases(row.kernelcup) if row.kernelcup else ([], [])
    kc = (kc + [None] * cases)[:cases]
    both = [i for i in range(cases) if gm[i] and kc[i]]  # each side's mean over the same cases where both timed
    gm_mean = geomean([gm[i] for i in both] if both else gm)
    kc_mean = geomean([kc[i] for i in both] if both else kc)
    gm_verdict = f"{row.gpumode.get('mode', '')}: {row.gpumode.get('verdict', '')}" if row.gpumode else ""
    if row.gpumode.get("mode") == "benchmark":
        gm_verdict += f" (after {row.gpumode.get('tried', '')})"
    versus = " / ".join(ratio(k, b) or "–" for k, b in zip(kc, baseline, strict=False)) if any(kc) else ""
    return [
        row.entry.name,
        row.entry.kind,
        micro(gm) if row.gpumode else "",
        micro(kc) if any(kc) else "",
        ratio(kc[-1], gm[-1]),
        "" if gm_mean is None else f"{gm_mean / 1e3:.2f}",
        "" if kc_mean is None else f"{kc_mean / 1e3:.2f}",
        versus,
        short(gm_verdict),
        short(row.kernelcup.get("verdict", "")),
        short("; ".join(messages)),
        row.note,
    ]


HEADINGS = [
    "file",
    "kind",
    "GPU MODE mean per case (µs)",
    "kernelcup median per case (µs)",
    "kernelcup / GPU MODE, largest case",
    "GPU MODE geomean (µs)",
    "kernelcup geomean (µs)",
    "kernelcup / its add_once per case",
    "GPU MODE",
    "kernelcup ranked",
    "kernelcup case messages",
    "note",
]


def markdown(rows: list[Row], cases: int, header: str) -> str:
    base = next((r for r in rows if r.entry.name == BASELINE and r.kernelcup), None)
    baseline = kernelcup_cases(base.kernelcup)[0] if base else [None] * cases
    lines = [header, "", "| " + " | ".join(HEADINGS) + " |", "|" + "---|" * len(HEADINGS)]
    for row in rows:
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells(row, cases, baseline)) + " |")
    return "\n".join(lines) + "\n"


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, nargs="?", default=Path(".device/reference-kernels"),
                        help="reference-kernels checkout (or its problems/ folder)")
    parser.add_argument("--files", default="", help="only these record cases or solutions (comma-separated names)")
    parser.add_argument("--no-shipped", action="store_true", help="skip GPU MODE's shipped solutions")
    parser.add_argument("--gpumode-cases", default="all", choices=("all", "last"))
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--run-cap-s", type=float, default=240.0, help="most seconds one run may take")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--list", action="store_true", help="show what would run; run nothing")
    return parser.parse_args()


def find_vectoradd(checkout: Path) -> tuple[Problem | None, str]:
    root = problems_root(checkout.resolve())
    if not root.is_dir():
        return None, f"{checkout} is not there: prepare it as bench/gpu/gpumode_compat.py says"
    found = find_problems(root, [PROBLEM_SET], {PROBLEM})
    if not found or found[0].task is None:
        return None, f"{PROBLEM_SET}/{PROBLEM}: " + (found[0].error if found else "not found")
    return found[0], ""


def main() -> int:
    args = arguments()
    only = {name for name in args.files.split(",") if name}
    problem, why = find_vectoradd(args.checkout)
    entries = record_cases(only) + (shipped(problem, only) if problem and not args.no_shipped else [])
    if args.list:
        for entry in entries:
            print(f"{entry.kind:8} {entry.name}")
        print("problem:", why or f"{PROBLEM_SET}/{PROBLEM}, leaderboard {problem.name if problem else ''}")
        return 0
    if problem is None or problem.task is None:
        print(why, file=sys.stderr)
        return 2
    out = Path(os.environ.get("OUT") or "gpu-out").resolve()
    out.mkdir(parents=True, exist_ok=True)
    gpu = gpu_info(args.device)
    runner = Runner(problem, args, gpu, out)
    cases = len(problem.task.task.get("benchmarks", []))
    header = (
        f"# Hiding places and honest patterns on GPU MODE's {PROBLEM} ({PROBLEM_SET}): GPU MODE's eval vs "
        f"kernelcup ranked, on {gpu.name if args.device == 'cuda' else 'the CPU'} "
        f"({time.strftime('%Y-%m-%d %H:%M')}, reference-kernels {reference_version(args.checkout)})"
    )
    rows = [Row(entry) for entry in entries]
    for row in rows:
        runner.run(row)
        (out / "record_check.md").write_text(markdown(rows, cases, header))
    runner.log.close()
    print((out / "record_check.md").read_text())
    print(f"full output under {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
