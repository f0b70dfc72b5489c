"""GPU MODE's own ``eval.py`` against kernelcup's harness, on GPU MODE's public problems (issue #13).

For every selected problem of gpu-mode/reference-kernels and each of its shipped solutions
(``solutions/correct/*.py`` and ``solutions/wrong/*.py``, else ``submission.py``):

1. the problem's own ``eval.py`` as GPU MODE runs it: the task's files and the solution in one
   folder, ``python eval.py test tests.txt`` with ``POPCORN_FD`` (its cases file in GPU MODE's
   format), its report read from the descriptor;
2. kernelcup in ``test`` mode: ``python -m kernelcup.harness`` with the spec the local runner would
   build (``kernelcup.core.leaderboards.tasks.read_task_folder`` +
   ``kernelcup.core.pipeline.jobspec.spec_for``; leaderboard names from the problem set's yaml, as
   ``sync`` gives them);
3. kernelcup in ``ranked`` mode, for the shipped correct solutions;
4. with ``--gpumode-ranked``: GPU MODE's ``leaderboard`` mode too (its score beside ours);
   with ``--twice``: kernelcup ``ranked`` a second time right after the first, and the pair's
   figures as ``run_all.py``'s repeatability table gives them (issue #14: repeatability on
   problems nobody here wrote), e.g. ``--sets pmpp_v2 --ranked-only --no-wrong --twice``;
5. where GPU MODE fails a shipped *correct* solution: the problem's reference run as the
   submission through GPU MODE's eval, as evidence that the reference fails its own check on
   this GPU (TF32, nondeterminism).

One failure never stops the table; every run has its own time limit; runs stop starting once
``--budget-s`` is spent (the rest are listed as skipped). Output under ``$OUT`` (default
``./gpu-out``): ``gpumode_compat.md`` (the table, also printed), ``gpumode_compat.json``
(rows) and ``gpumode_runs.jsonl`` (every run: verdicts, report, stderr tails).

Prepare the problems on the machine holding the fetched mirror (never commit them:
``.device/`` is git-ignored, and GPU MODE's license is not ours)::

    mkdir -p .device/reference-kernels
    git --git-dir=/work/.mirror/gpu-mode+reference-kernels/repo archive HEAD problems \\
        | tar -x -C .device/reference-kernels
    git --git-dir=/work/.mirror/gpu-mode+reference-kernels/repo rev-parse HEAD \\
        > .device/reference-kernels/VERSION

Run on the GPU machine from the repository root, carrying ``.device/reference-kernels``, in
calls of under 10 minutes each (each call's results under its own ``$OUT``)::

    python3 bench/gpu/gpumode_compat.py .device/reference-kernels --sets pmpp_v2 --budget-s 560
    python3 bench/gpu/gpumode_compat.py .device/reference-kernels --sets bioml,princeton,linalg --budget-s 560
    python3 bench/gpu/gpumode_compat.py .device/reference-kernels --sets helion,nvidia,pmpp --budget-s 560

Test verdicts of every selected solution come first, ranked runs after them, so a budget
that runs out leaves the comparison whole; rerun what it skipped with ``--problems``.

``--list`` shows what would run; ``--problems sort_py,prefixsum_py`` narrows to folders;
``--device cpu`` tries the script's own parts on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import script_paths  # noqa: F401  (first: the repository on the path, and a YAML reader)

# isort: split
import registry
from conftest import run_harness
from repeatability import cases_repeat, ranges_overlap

from kernelcup.core.errors import UserError
from kernelcup.core.leaderboards.problem_sets import find_task_folders
from kernelcup.core.leaderboards.tasks import TaskFolder, read_task_folder, submission_file_name, task_config
from kernelcup.core.pipeline.jobspec import spec_for
from kernelcup.harness.cuda_eval import Report
from kernelcup.harness.spec import GpuInfo, Mode, Result, Status

# Every problem of pmpp_v2, and problems of the other NVIDIA-runnable sets.
DEFAULT_SETS = ("pmpp_v2", "bioml", "princeton", "linalg", "pmpp", "helion", "nvidia")
DEFAULT_OTHERS = {
    "helion": ("causal_conv1d_py", "fp8_quant_py"),  # imports helion: one clear line expected
    "nvidia": ("nvfp4_gemv",),  # Blackwell-only formats: a verdict on an H100 all the same
}
REFERENCE_AS_SUBMISSION = "from reference import ref_kernel as custom_kernel  # noqa: F401\n"
SHOWN = 140


@dataclass
class Problem:
    name: str  # the leaderboard name kernelcup's sync gives it
    set: str
    folder: Path
    task: TaskFolder | None
    error: str = ""  # why kernelcup cannot load it


@dataclass
class Row:
    problem: str
    solution: str
    expect: str
    cells: dict[str, Any] = field(default_factory=dict)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.started = time.monotonic()
        self.seconds = seconds

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)


def short(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def gpu_info(device: str) -> GpuInfo:
    if device != "cuda":
        return GpuInfo()
    import torch

    return registry.gpu_info(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")


# --- finding problems ----------------------------------------------------------------------


def problems_root(path: Path) -> Path:
    return path / "problems" if (path / "problems").is_dir() else path


def find_problems(root: Path, sets: list[str], only: set[str]) -> list[Problem]:
    found, errors = find_task_folders(root)
    problems = []
    for entry in found:
        problem_set = entry.folder.parent.name
        if problem_set not in sets:
            continue
        if only and entry.folder.name not in only and entry.name not in only:
            continue
        if not only and problem_set in DEFAULT_OTHERS and entry.folder.name not in DEFAULT_OTHERS[problem_set]:
            continue
        try:
            problems.append(Problem(entry.name, problem_set, entry.folder, read_task_folder(
                entry.folder, entry.name, reach=root)))
        except (UserError, OSError, ValueError) as exc:
            problems.append(Problem(entry.name, problem_set, entry.folder, None, getattr(exc, "message", str(exc))))
    for where, error in errors.items():
        print(f"note: {where}: {error}", file=sys.stderr)
    return sorted(problems, key=lambda p: (sets.index(p.set), p.folder.name))


def solutions_of(problem: Problem, with_wrong: bool) -> list[tuple[str, str, str]]:
    """(label, source, expect) for each shipped solution."""
    found = []
    for expect in ("correct", "wrong") if with_wrong else ("correct",):
        for path in sorted((problem.folder / "solutions" / expect).glob("*.py")):
            found.append((f"{expect}/{path.name}", path.read_text(), "pass" if expect == "correct" else "fail"))
    if not found and (problem.folder / "submission.py").is_file():
        found.append(("submission.py", (problem.folder / "submission.py").read_text(), "pass"))
    return found


# --- GPU MODE's own eval.py ----------------------------------------------------------------


def case_lines(cases: list[dict[str, Any]]) -> str:
    """GPU MODE's cases file: ``name: value; name: value`` per line (kernelbot's format)."""
    return "".join("; ".join(f"{k}: {v}" for k, v in case.items()) + "\n" for case in cases)


def gpumode_eval(
    problem: Problem, code: str, mode: str, timeout_s: float, device: str, seed: int | None = None
) -> dict[str, Any]:
    """Run the problem's own evaluator as GPU MODE's runner does; its verdict and report."""
    assert problem.task is not None
    task = problem.task.task
    config = task_config(task)
    main = config.main
    cases = config.tests if mode == "test" else config.benchmarks
    if mode != "test" and config.ranking_by == "last":
        cases = cases[-1:]  # GPU MODE hands only the last benchmark to a `last` leaderboard
    folder = Path(tempfile.mkdtemp(prefix="gpumode-"))
    started = time.monotonic()
    try:
        for name, content in problem.task.files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(content)
        (folder / submission_file_name(task)).write_text(code)
        (folder / "cases.txt").write_text(case_lines(cases))
        read_fd, write_fd = os.pipe()
        env = {**os.environ, "POPCORN_FD": str(write_fd)}
        env.pop("POPCORN_SEED", None)
        if seed is not None:
            env["POPCORN_SEED"] = str(seed)
        if device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        report = Report(read_fd)
        report.start()
        try:
            process = subprocess.Popen(
                [sys.executable, main, mode, "cases.txt"],
                cwd=folder,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(write_fd,),
                start_new_session=True,
            )
        finally:
            os.close(write_fd)
        try:
            stdout, stderr = process.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            stdout, stderr = process.communicate()
            timed_out = True
        report.join(timeout=5)
        values = dict(report.values)
        wall = time.monotonic() - started
        passed = values.get("check") == "pass" and not timed_out and process.returncode in (0, None)
        if timed_out:
            verdict = f"timeout after {timeout_s:.0f} s"
        elif passed:
            verdict = "pass"
        else:
            verdict = "fail: " + _gpumode_failure(values, process.returncode, stderr.decode(errors="replace"))
        score = None
        if passed and mode != "test":
            means = [float(values[k]) for k in sorted(values) if re.fullmatch(r"benchmark\.\d+\.mean", k)]
            score = means[-1] * 1e-9 if means else None
        return {
            "passed": passed,
            "verdict": verdict,
            "wall_s": wall,
            "score_s": score,
            "report": values,
            "stdout": stdout.decode(errors="replace")[-2000:],
            "stderr": stderr.decode(errors="replace")[-4000:],
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _gpumode_failure(values: dict[str, str], returncode: int | None, stderr: str) -> str:
    for key in sorted(values):
        if re.fullmatch(r"(test|benchmark)\.\d+\.error", key):
            return f"{key.rsplit('.', 1)[0]}: {values[key]}"
    if values.get("error"):
        return values["error"]
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return f"exit {returncode}: {lines[-1] if lines else 'no output'}"


# --- kernelcup -----------------------------------------------------------------------------


def kernelcup_run(
    problem: Problem, code: str, mode: Mode, device: str, gpu: GpuInfo, cap_s: float, env: dict[str, str]
) -> dict[str, Any]:
    assert problem.task is not None
    spec = spec_for(
        problem.task.task,
        problem.task.files,
        code,
        mode,
        job_id=f"gpumode-{problem.name}-{mode}",
        gpu=gpu,
        device=device,
        secret_seed=secrets.randbits(62),
        default_timeout_s=180.0,
    )
    spec.timeout_s = min(spec.timeout_s, cap_s)
    started = time.monotonic()
    try:
        outcome = run_harness(spec, wall_limit_s=spec.timeout_s + 60, env=env)
    except subprocess.TimeoutExpired:
        overran = "the harness overran its limit + 60 s"
        return {"passed": False, "verdict": overran, "wall_s": time.monotonic() - started}
    wall = time.monotonic() - started
    result: Result | None = outcome.result
    if result is None:
        tail = outcome.stderr.strip().splitlines()[-1:] or ["no stderr"]
        return {"passed": False, "verdict": f"no result line ({tail[0]})", "wall_s": wall}
    return {
        "passed": result.status is Status.PASSED,
        "verdict": f"{result.status.value}: {result.verdict}",
        "wall_s": wall,
        "score_s": result.score_s,
        "result": json.loads(result.to_json()),
    }


# --- the table -----------------------------------------------------------------------------

COLUMNS = [
    ("problem", "problem"),
    ("solution", "solution"),
    ("expect", "shipped as"),
    ("gm_test", "GPU MODE test"),
    ("kc_test", "kernelcup test"),
    ("same", "same verdict"),
    ("kc_ranked", "kernelcup ranked"),
    ("kc_score", "kernelcup ranked score"),
    ("kc_score2", "kernelcup ranked again"),
    ("pair_diff", "pair diff"),
    ("pair_worst", "worst case"),
    ("pair_cases_ok", "every case ≤ max(1%, 0.2 µs)"),
    ("pair_tie", "ranges overlap (tie)"),
    ("pair", "pair"),
    ("gm_ranked", "GPU MODE leaderboard"),
    ("gm_score", "GPU MODE score (mean)"),
    ("gm_test_s", "GPU MODE test s"),
    ("kc_test_s", "kernelcup test s"),
    ("kc_ranked_s", "kernelcup ranked s"),
    ("note", "note"),
]


def cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.1f}" if value >= 1 else f"{value:.3g}"
    return short(str(value)).replace("|", "/")


def seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value * 1e6:.1f} µs" if value < 1e-3 else f"{value * 1e3:.3f} ms"


def markdown(rows: list[Row], header: str, notes: list[str]) -> str:
    used = [(key, title) for key, title in COLUMNS if any(row.cells.get(key) not in (None, "") for row in rows)]
    used = [(k, t) for k, t in COLUMNS[:3] if (k, t) not in used] + used
    lines = [header, ""]
    lines.append("| " + " | ".join(title for _, title in used) + " |")
    lines.append("|" + "---|" * len(used))
    for row in rows:
        values = {"problem": row.problem, "solution": row.solution, "expect": row.expect, **row.cells}
        lines.append("| " + " | ".join(cell(values.get(key)) for key, _ in used) + " |")
    agree = [r for r in rows if r.cells.get("same") in ("yes", "no")]
    lines += ["", f"Same test verdict: {sum(r.cells['same'] == 'yes' for r in agree)} of {len(agree)} runs."]
    ranked = [r for r in rows if r.expect == "pass" and r.cells.get("kc_ranked")]
    passed = sum(str(r.cells["kc_ranked"]).startswith("passed") for r in ranked)
    lines.append(f"kernelcup ranked passes {passed} of {len(ranked)} shipped correct solutions it ran.")
    if notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", type=Path, help="reference-kernels checkout (or its problems/ folder)")
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS))
    parser.add_argument("--problems", default="", help="only these problem folders or leaderboard names")
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--run-cap-s", type=float, default=240.0, help="most seconds one run may take")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--no-wrong", action="store_true", help="skip the shipped wrong solutions")
    parser.add_argument("--no-ranked", action="store_true", help="test mode only")
    parser.add_argument("--ranked-only", action="store_true",
                        help="kernelcup ranked only (no test comparison): for problems whose tests take minutes")
    parser.add_argument("--gpumode-ranked", action="store_true", help="also GPU MODE's leaderboard mode")
    parser.add_argument("--twice", action="store_true",
                        help="rank each solution twice back to back: issue #14's repeatability pair")
    parser.add_argument("--list", action="store_true", help="show the problems and solutions; run nothing")
    args = parser.parse_args()

    root = problems_root(args.checkout.resolve())
    sets = [s for s in args.sets.split(",") if s]
    problems = find_problems(root, sets, {p for p in args.problems.split(",") if p})
    out = Path(os.environ.get("OUT") or "gpu-out").resolve()
    out.mkdir(parents=True, exist_ok=True)
    if args.list:
        for problem in problems:
            listed = [label for label, _, _ in solutions_of(problem, not args.no_wrong)] if problem.task else []
            print(f"{problem.set}/{problem.folder.name} -> {problem.name}: {problem.error or ', '.join(listed)}")
        return 0
    env = {"KERNELCUP_CACHE_DIR": str(Path(tempfile.gettempdir()) / "kernelcup-gpu-cache")}
    gpu = gpu_info(args.device)
    budget = Budget(args.budget_s)
    rows: list[Row] = []
    notes: list[str] = []
    runs_log = (out / "gpumode_runs.jsonl").open("a")
    header = (
        f"# GPU MODE's eval vs kernelcup on {gpu.name if args.device == 'cuda' else 'the CPU'} "
        f"({time.strftime('%Y-%m-%d %H:%M')}, reference-kernels {reference_version(args.checkout)})"
    )

    def save() -> None:
        (out / "gpumode_compat.json").write_text(json.dumps([r.__dict__ for r in rows], indent=1, default=str))
        (out / "gpumode_compat.md").write_text(markdown(rows, header, notes))

    def log(kind: str, row: Row, outcome: dict[str, Any]) -> None:
        runs_log.write(json.dumps({"run": kind, "problem": row.problem, "solution": row.solution, **outcome},
                                  default=str) + "\n")
        runs_log.flush()

    def time_left(cap: float) -> float | None:
        left = budget.left()
        return min(cap, left - 10) if left > 30 else None

    # Test verdicts of every solution first (the comparison), then ranked runs (the costly part),
    # so a budget that runs out leaves a complete verdict column.
    work: list[tuple[Problem, str, Row]] = []
    for problem in problems:
        if problem.task is None:
            rows.append(Row(problem.name, "", "", {"kc_test": f"not loaded: {problem.error}"}))
            continue
        for label, code, expect in solutions_of(problem, not args.no_wrong):
            row = Row(problem.name, label, expect)
            rows.append(row)
            work.append((problem, code, row))
    for stage in (ranked_stage,) if args.ranked_only else (test_stage, ranked_stage):
        for problem, code, row in work:
            try:
                stage(problem, code, row, args, gpu, env, time_left, log)
            except Exception:
                row.cells["note"] = "script error: " + traceback.format_exc().strip().splitlines()[-1]
                notes.append(f"{problem.name} {row.solution}: {traceback.format_exc()[-1200:]}")
            save()
    save()
    runs_log.close()
    print((out / "gpumode_compat.md").read_text())
    print(f"full output under {out}")
    return 0


Log = Callable[[str, Row, dict[str, Any]], None]
TimeLeft = Callable[[float], float | None]


def test_stage(problem: Problem, code: str, row: Row, args: Any, gpu: GpuInfo, env: dict[str, str],
               time_left: TimeLeft, log: Log) -> None:
    """GPU MODE's eval and kernelcup in test mode; the reference's own check where GPU MODE
    fails a correct solution."""
    test_cap = float((problem.task.task if problem.task else {}).get("test_timeout") or 180)
    limit = time_left(min(args.run_cap_s, test_cap))
    if limit is None:
        row.cells["note"] = "skipped: out of time budget"
        return
    gm = gpumode_eval(problem, code, "test", limit, args.device)
    log("gpumode test", row, gm)
    row.cells.update(gm_test=gm["verdict"], gm_test_s=gm["wall_s"])
    limit = time_left(min(args.run_cap_s, test_cap))
    if limit is None:
        row.cells["note"] = "kernelcup skipped: out of time budget"
        return
    kc = kernelcup_run(problem, code, Mode.TEST, args.device, gpu, limit, env)
    log("kernelcup test", row, kc)
    row.cells.update(kc_test=kc["verdict"], kc_test_s=kc["wall_s"])
    row.cells["same"] = "yes" if gm["passed"] == kc["passed"] else "no"
    if row.expect == "pass" and not gm["passed"]:
        evidence = time_left(min(args.run_cap_s, test_cap))
        if evidence is not None:
            own = gpumode_eval(problem, REFERENCE_AS_SUBMISSION, "test", evidence, args.device)
            log("gpumode reference as submission", row, own)
            row.cells["note"] = (
                "the problem's reference fails its own check here: " + own["verdict"]
                if not own["passed"]
                else "the problem's reference passes its own check here"
            )


def ranked_stage(problem: Problem, code: str, row: Row, args: Any, gpu: GpuInfo, env: dict[str, str],
                 time_left: TimeLeft, log: Log) -> None:
    """kernelcup ranked (and GPU MODE's leaderboard mode) for a shipped correct solution."""
    if args.no_ranked or row.expect != "pass" or ("kc_test" not in row.cells and not args.ranked_only):
        return
    ranked_cap = float((problem.task.task if problem.task else {}).get("ranked_timeout") or 180)
    limit = time_left(min(args.run_cap_s, ranked_cap))
    if limit is None:
        row.cells["kc_ranked"] = "skipped: out of time budget"
        return
    ranked = kernelcup_run(problem, code, Mode.RANKED, args.device, gpu, limit, env)
    log("kernelcup ranked", row, ranked)
    row.cells.update(kc_ranked=ranked["verdict"], kc_ranked_s=ranked["wall_s"], kc_score=seconds(ranked.get("score_s")))
    if args.twice and ranked["passed"]:
        limit = time_left(min(args.run_cap_s, ranked_cap))
        again = kernelcup_run(problem, code, Mode.RANKED, args.device, gpu, limit, env) if limit else None
        if again is not None:
            log("kernelcup ranked again", row, again)
            row.cells.update(kc_score2=seconds(again.get("score_s")), **pair_cells(ranked, again))
    if args.gpumode_ranked:
        limit = time_left(min(args.run_cap_s, ranked_cap))
        if limit is not None:
            board = gpumode_eval(problem, code, "leaderboard", limit, args.device, seed=secrets.randbits(31))
            log("gpumode leaderboard", row, board)
            row.cells.update(gm_ranked=board["verdict"], gm_score=seconds(board.get("score_s")))


def pair_cells(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """The pair's figures as run_all.py's repeatability table gives them."""
    if not second.get("passed") or not first.get("score_s") or not second.get("score_s"):
        return {"pair": "second run failed: " + short(second.get("verdict", ""))}
    one, two = (Result.from_dict(run["result"]) for run in (first, second))
    a, b = first["score_s"], second["score_s"]
    every, worst = cases_repeat(one, two)
    return {"pair_diff": f"{abs(a - b) / min(a, b) * 100:.3f}%", "pair_worst": worst, "pair_cases_ok": every,
            "pair_tie": ranges_overlap(one, two)}


def reference_version(checkout: Path) -> str:
    head = checkout / "VERSION"
    return head.read_text().strip() if head.is_file() else "from the fetched mirror's HEAD"


if __name__ == "__main__":
    sys.exit(main())
