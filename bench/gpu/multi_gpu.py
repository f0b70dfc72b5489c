"""The multi-GPU check: every shipped multi-GPU solution through the real harness with NCCL.

    python bench/gpu/multi_gpu.py [--world-size 2] [--leaderboards allreduce,gemm_rs] [--budget-s 540]

On a machine with at least ``--world-size`` GPUs (2 by default; 4 or 8 run the same
leaderboards with every case's ``world_size`` set to that), from the repository root, as the
local runner calls the harness (``python -m kernelcup.harness``, one process per rank, NCCL on a loopback
port, each rank on its own card). It runs:

- every solution of every multi-GPU leaderboard in ``test`` mode: the verdict must match its
  ``expect:`` header;
- every passing solution in ``ranked`` mode twice back to back: the two scores and their
  difference (target within 1-2%), and each rank's median per benchmark case;
- the hang case (rank 1 never joins the all-reduce rank 0 waits in): a timeout verdict naming
  rank 1 within the mode's limit, and no process of the job left afterwards;
- a rank that dies (``os._exit``): a crash verdict naming it, within seconds.

Results go under ``$OUT`` (default ``./gpu-out``): ``multi_gpu_report.md`` (also printed) and
every harness result in ``multi_gpu_runs.jsonl``; a line per run goes to stderr as it ends.
Written in a session without a 2-GPU machine: it has run to its end on the CPU (``--device cpu``,
gloo) only; one start on two H100s was cut short at 150 s before its report.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

from script_paths import REPO  # first: the repository on the path, and a YAML reader

# isort: split
import torch
from conftest import leaderboard_spec, processes_named, read_run, run_harness, start_harness

from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, Result, Status

LEADERBOARDS = REPO / "leaderboards"
FIXTURES = REPO / "tests" / "harness" / "fixtures" / "multi_gpu"
SECRET = 20261125


def multi_gpu_boards() -> list[Path]:
    import yaml

    return [folder for folder in sorted(LEADERBOARDS.iterdir())
            if (folder / "task.yml").is_file() and yaml.safe_load((folder / "task.yml").read_text()).get("multi_gpu")]


def expectation(path: Path) -> str:
    for line in path.read_text().splitlines()[:5]:
        if line.startswith("# expect:"):
            return line.split(":", 1)[1].strip()
    return "pass"


def spec_for(folder: Path, source: str, mode: Mode, world_size: int, device: str, timeout_s: float) -> JobSpec:
    spec: JobSpec = leaderboard_spec(folder, source, mode, timeout_s=timeout_s, device=device,
                                     secret_seed=SECRET, gpu=GpuInfo(name=gpu_name(device)))
    spec.task.world_size = world_size
    for case in [*spec.task.tests, *spec.task.benchmarks]:
        case["world_size"] = world_size
    return spec


def gpu_name(device: str) -> str:
    return torch.cuda.get_device_name() if device == "cuda" and torch.cuda.is_available() else "cpu"


class Report:
    def __init__(self, out: Path) -> None:
        self.out = out
        self.lines: list[str] = []
        out.mkdir(parents=True, exist_ok=True)
        self.runs = (out / "multi_gpu_runs.jsonl").open("a")

    def run(self, name: str, spec: JobSpec) -> tuple[Result | None, float]:
        began = time.monotonic()
        outcome = run_harness(spec)
        seconds = time.monotonic() - began
        result = outcome.result
        self.runs.write(json.dumps({"name": name, "mode": str(spec.mode), "seconds": seconds,
                                    "result": result.to_dict() if result else None,
                                    "stderr": outcome.stderr[-4000:]}) + "\n")
        self.runs.flush()
        # As it goes, so a run cut short by a time limit still shows how far it got and why.
        verdict = f"{result.status.value}: {result.verdict[:200]}" if result else f"no result: {outcome.stderr[-300:]}"
        print(f"{name} ({spec.mode.value}, {seconds:.1f} s): {verdict}", file=sys.stderr, flush=True)
        return result, seconds

    def table(self, title: str, header: list[str], rows: list[list[Any]]) -> None:
        self.lines += [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        self.lines += ["| " + " | ".join(str(cell).replace("|", "/") for cell in row) + " |" for row in rows]
        self.lines.append("")

    def finish(self, head: str) -> str:
        text = "\n".join([head, "", *self.lines])
        (self.out / "multi_gpu_report.md").write_text(text + "\n")
        return text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--leaderboards", default="")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--hang-timeout-s", type=float, default=30.0)
    args = parser.parse_args(argv)
    ws = args.world_size
    if args.device == "cuda" and torch.cuda.device_count() < ws:
        print(f"this machine has {torch.cuda.device_count()} GPUs; the check needs {ws} (--world-size)")
        return 2
    report = Report(Path(os.environ.get("OUT", "gpu-out")))
    started = time.monotonic()
    wanted = {name for name in args.leaderboards.split(",") if name}
    boards = [f for f in multi_gpu_boards() if not wanted or f.name in wanted]

    verdicts: list[list[Any]] = []
    passing: list[tuple[Path, Path]] = []
    for folder in boards:
        for path in sorted((folder / "solutions").glob("*.py")):
            expect = expectation(path)
            result, seconds = report.run(path.name, spec_for(folder, path.read_text(), Mode.TEST, ws, args.device, 180))
            status = result.status if result else None
            ok = (status is Status.PASSED) == (expect == "pass") and status in (Status.PASSED, Status.FAILED)
            verdicts.append([f"{folder.name}/{path.name}", expect, status, "ok" if ok else "BAD", f"{seconds:.1f}",
                             (result.verdict if result else "no result")[:160]])
            if expect == "pass" and status is Status.PASSED:
                passing.append((folder, path))
    report.table(f"Test mode, {ws} ranks", ["solution", "expect", "status", "", "wall s", "verdict"], verdicts)

    ranked: list[list[Any]] = []
    per_rank: list[list[Any]] = []
    for folder, path in passing:
        if time.monotonic() - started > args.budget_s:
            ranked.append([f"{folder.name}/{path.name}", "skipped: budget spent", "", "", ""])
            continue
        scores = []
        cards = ""
        for attempt in (1, 2):
            result, seconds = report.run(f"{path.name} ranked {attempt}",
                                         spec_for(folder, path.read_text(), Mode.RANKED, ws, args.device, 300))
            scores.append(result.score_s if result and result.passed else None)
            if result is not None and attempt == 1:
                for case in result.benchmarks:
                    shown = {k: v for k, v in case.case.items() if k not in ("seed", "world_size")}
                    per_rank.append([f"{folder.name}/{path.name}", shown, f"{(case.median_ns or 0) / 1e3:.1f}",
                                     " / ".join(f"{v / 1e3:.1f}" for v in case.rank_median_ns), case.runs])
                cards = "; ".join(result.system.ranks)
        known = [s for s in scores if s is not None]
        diff = f"{100 * abs(known[0] - known[1]) / min(known):.2f}%" if len(known) == 2 else "-"
        ranked.append([f"{folder.name}/{path.name}",
                       *(f"{s * 1e6:.1f} µs" if s else "failed" for s in scores), diff, cards])
    report.table(f"Ranked twice back to back, {ws} ranks", ["solution", "score 1", "score 2", "diff", "cards"], ranked)
    report.table("Per-rank medians (first ranked run), µs", ["solution", "case", "call (slowest rank)",
                                                             "rank 0 / rank 1 / ...", "runs"], per_rank)

    hostile: list[list[Any]] = []
    allreduce = LEADERBOARDS / "allreduce"
    if allreduce.is_dir():
        marker = f"kcmg{secrets.token_hex(3)}"
        source = (FIXTURES / "rank1_never_joins.py.txt").read_text().replace("@MARKER@", marker)
        spec = spec_for(allreduce, source, Mode.TEST, ws, args.device, args.hang_timeout_s)
        began = time.monotonic()
        harness = start_harness()
        stdout, stderr = harness.communicate(spec.to_json(), timeout=args.hang_timeout_s + 120)
        seconds = time.monotonic() - began
        result = read_run(stdout, stderr, harness.returncode, spec.result_key).result
        time.sleep(1.0)
        left = processes_named(marker)
        named = result is not None and "rank 1 never joined" in result.verdict
        hostile.append(["rank 1 never joins", result.status if result else None,
                        "ok" if named and not left and result and result.status is Status.TIMED_OUT else "BAD",
                        f"{seconds:.1f}", f"{len(left)} left", (result.verdict if result else stderr[-300:])[:200]])
        spec = spec_for(allreduce, (FIXTURES / "rank1_dies.py.txt").read_text(), Mode.TEST, ws, args.device, 60)
        result, seconds = report.run("rank1_dies", spec)
        ok = result is not None and result.status is Status.CRASHED and result.verdict.startswith("rank 1's process")
        hostile.append(["rank 1 dies", result.status if result else None, "ok" if ok else "BAD", f"{seconds:.1f}",
                        "", (result.verdict if result else "no result")[:200]])
    report.table("A rank that hangs or dies", ["case", "status", "", "wall s", "processes", "verdict"], hostile)

    head = (f"## Multi-GPU check: {ws} x {gpu_name(args.device)}, torch {torch.__version__}, "
            f"{time.strftime('%Y-%m-%d')}")
    print(report.finish(head))
    bad = any(row[3] == "BAD" for row in verdicts) or any(row[2] == "BAD" for row in hostile)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
