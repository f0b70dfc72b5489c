"""Run every shipped solution on a GPU: verdicts and timings.

Not a pytest module (CI has no GPU). On a machine with CUDA, from the repository root:

    python tests/leaderboards/gpu_check.py [leaderboard ...]

For each solution (and each template) it runs the test cases as the CPU test does, but on
"cuda", and compares the verdict with the solution's ``# expect:`` line; for passing solutions
it checks and times every benchmark case (``triton.testing.do_bench``: median, L2 flushed).
CUDA leaderboards' sources are built with nvcc as the harness builds them and their driver is
run directly in ``test`` and ``benchmark`` modes (the driver's own timing). This is a check of
the problem files, not of the harness.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_leaderboard_files as files


def templates(folder: Path) -> list[files.Solution]:
    return [
        files.Solution(folder / name, folder.name, "pass", requires_cuda=True)
        for name in files.load_task(folder)["templates"].values()
        if name.endswith(".py")
    ]


def time_case(reference: Any, submission: Any, case: dict[str, Any]) -> dict[str, Any]:
    from triton.testing import do_bench

    data = reference.generate_input(**case, device="cuda")
    given = files.clone(data)
    ok, message = reference.check_implementation(data, submission.custom_kernel(given))
    if not ok:
        return {"case": case, "ok": False, "message": message[:500]}
    ms = do_bench(lambda: submission.custom_kernel(given), warmup=50, rep=200)
    row: dict[str, Any] = {"case": case, "ok": True, "us": ms * 1e3}
    if hasattr(reference, "bytes"):
        row["GB/s"] = reference.bytes(**case) / (ms * 1e-3) / 1e9
    if hasattr(reference, "flops"):
        row["TFLOP/s"] = reference.flops(**case) / (ms * 1e-3) / 1e12
    return row


def check_solution(folder: Path, solution: files.Solution, benchmark: bool) -> dict[str, Any]:
    task = files.load_task(folder)
    result: dict[str, Any] = {"solution": solution.id, "expect": solution.expect}
    with tempfile.TemporaryDirectory() as workdir:
        try:
            started = time.perf_counter()
            with files.leaderboard_modules(folder, solution.path, Path(workdir)) as (ref, sub):
                assert sub is not None
                verdicts = []
                for case in task["tests"]:
                    data = ref.generate_input(**case, device="cuda")
                    given = files.clone(data)
                    if folder.name in files.OUTPUT_BUFFER:
                        given[-1].fill_(math.nan)
                    output = sub.custom_kernel(given)
                    torch.cuda.synchronize()
                    verdicts.append(ref.check_implementation(data, output))
                passed = all(ok for ok, _ in verdicts)
                result["tests_passed"] = passed
                result["first_failure"] = next((m[:300] for ok, m in verdicts if not ok), "")
                result["as_expected"] = passed == (solution.expect == "pass")
                result["test_seconds"] = round(time.perf_counter() - started, 2)
                if benchmark and passed:
                    result["benchmarks"] = [time_case(ref, sub, c) for c in task["benchmarks"]]
        except Exception:
            result["as_expected"] = solution.expect == "fail"
            result["error"] = traceback.format_exc()[-1500:]
    return result


def run_driver(binary: Path, mode: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    """Run a CUDA driver as the harness does; its ``key: value`` report and exit status."""
    workdir = binary.parent
    (workdir / "cases.txt").write_text("\n".join("; ".join(f"{k}: {v}" for k, v in case.items()) for case in cases))
    read_fd, write_fd = os.pipe()
    env = {**os.environ, "POPCORN_FD": str(write_fd)}
    child = subprocess.Popen(
        [str(binary), mode, "cases.txt"], cwd=workdir, env=env, pass_fds=(write_fd,),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd) as stream:
        report = dict(line.partition(": ")[::2] for line in stream.read().splitlines())
    output = child.communicate(timeout=300)[0].decode(errors="replace")
    return {"rc": child.returncode, "report": report, "output": output[-500:]}


def check_cuda_solution(folder: Path, source: Path, arch: str) -> dict[str, Any]:
    task = files.load_task(folder)
    header = files.read_header(source)
    expect = header.get("expect", "pass")
    result: dict[str, Any] = {"solution": source.relative_to(files.LEADERBOARDS).as_posix()}
    result["expect"] = expect
    with tempfile.TemporaryDirectory() as name:
        workdir = Path(name)
        for entry in task["files"]:
            target = workdir / entry["name"]
            shutil.copy(source if entry["source"] == "@SUBMISSION@" else folder / entry["source"], target)
        config = task["config"]
        build = subprocess.run(
            ["nvcc", "-std=c++17", "-O3", "-lineinfo", f"-arch={arch}", "-I", ".",
             *[f"-I{d}" for d in config.get("include_dirs", [])],
             *[f"-D{k}={v}" for k, v in (config.get("defines") or {}).items()],
             *config.get("compile_flags", []), *config["sources"], "-o", "kernelcup_eval"],
            cwd=workdir, capture_output=True, text=True,
        )  # fmt: skip
        if build.returncode != 0:
            result.update(as_expected=False, error="nvcc: " + build.stderr[-1500:])
            return result
        binary = workdir / "kernelcup_eval"
        test = run_driver(binary, "test", task["tests"])
        passed = test["rc"] == 0 and test["report"].get("check") == "pass"
        result["tests_passed"] = passed
        result["first_failure"] = next((v[:300] for k, v in test["report"].items() if k.endswith(".error")), "")
        result["as_expected"] = passed == (expect == "pass") and test["rc"] in (0, 112)
        if not result["as_expected"]:
            result["error"] = json.dumps(test)[-1500:]
        if passed:
            bench = run_driver(binary, "benchmark", task["benchmarks"])
            rows = []
            for i, case in enumerate(task["benchmarks"]):
                report = bench["report"]
                ok = report.get(f"benchmark.{i}.status") == "pass"
                row: dict[str, Any] = {"case": case, "ok": ok}
                if ok:
                    row["us"] = float(report[f"benchmark.{i}.median"]) / 1e3
                    row["runs"] = int(report[f"benchmark.{i}.runs"])
                else:
                    row["message"] = report.get(f"benchmark.{i}.error", json.dumps(bench))[:500]
                rows.append(row)
            result["benchmarks"] = rows
            ranked = run_driver(binary, "leaderboard", task["benchmarks"][:1])
            result["leaderboard_mode"] = {k: v for k, v in ranked["report"].items() if "durations" not in k}
    return result


def main(names: list[str]) -> int:
    results = []
    major, minor = torch.cuda.get_device_capability()
    for folder in files.CU_FOLDERS:
        if names and folder.name not in names:
            continue
        for source, _ in [(p, None) for _, p in files.CU_SUBMISSIONS if p.is_relative_to(folder)]:
            results.append(check_cuda_solution(folder, source, f"sm_{major}{minor}"))
            print(json.dumps(results[-1]), flush=True)
    for folder in files.PY_FOLDERS:
        if names and folder.name not in names:
            continue
        if folder.name in files.MULTI_GPU:
            print(f"{folder.name}: multi-GPU, checked by bench/gpu/multi_gpu.py (one process per rank)", flush=True)
            continue
        for solution in files.solutions_of(folder):
            results.append(check_solution(folder, solution, benchmark=solution.expect == "pass"))
            print(json.dumps(results[-1]), flush=True)
        for template in templates(folder):
            results.append(check_solution(folder, template, benchmark=False))
            print(json.dumps(results[-1]), flush=True)
    print()
    print(f"GPU: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    for r in results:
        mark = "ok " if r.get("as_expected") else "BAD"
        print(f"{mark} {r['solution']:42s} expect {r['expect']:4s}", r.get("error", "")[-200:])
        for b in r.get("benchmarks", []):
            case = {k: v for k, v in b["case"].items() if k != "seed"}
            if b["ok"]:
                extra = f"  runs {b['runs']}" if "runs" in b else ""
                extra += "".join(f"  {k} {b[k]:.1f}" for k in ("GB/s", "TFLOP/s") if k in b)
                print(f"      {case}: {b['us']:.1f} us{extra}")
            else:
                print(f"      {case}: FAILED {b['message'][:200]}")
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "gpu_check.json").write_text(json.dumps(results, indent=1))
    return 0 if all(r.get("as_expected") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
