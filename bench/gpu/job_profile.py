"""Where one job's seconds go, function by function (issue #14's `submit test` latency).

Runs one leaderboard's `test` job (or ``--mode``'s) twice through ``python -m kernelcup.harness`` (the second
finds the build caches the first left), with the harness under cProfile and
``KERNELCUP_HARNESS_PROFILE=1`` (the submission's process under cProfile too, its profile in the
result's stdout), and prints each job's phases and the top of both profiles.

    python3 bench/gpu/job_profile.py LEADERBOARD_FOLDER SOLUTION_FILE [--top 45] [--runs 2]

Any leaderboard folder, GPU MODE's too (its parent is the leaderboards folder).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from kernelcup.core.leaderboards.tasks import read_task_folder  # noqa: E402
from kernelcup.core.pipeline.jobspec import spec_for  # noqa: E402
from kernelcup.harness.spec import GpuInfo, Mode, Result  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("solution", type=Path)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--mode", default="test", choices=[mode.value for mode in Mode])
    parser.add_argument(
        "--who-imports",
        default="torch._dynamo,triton",
        help="comma-separated modules: the harness's stack where each is first imported (stderr)",
    )
    args = parser.parse_args()
    task = read_task_folder(args.folder, reach=args.folder.resolve().parent)
    # full teardown: the harness would otherwise end before cProfile writes its report (harness/__main__.py)
    env = {**os.environ, "KERNELCUP_HARNESS_PROFILE": "1", "KERNELCUP_HARNESS_TEARDOWN": "full"}
    for run in range(1, args.runs + 1):
        spec = spec_for(
            task.task,
            task.files,
            args.solution.read_text(),
            Mode(args.mode),
            job_id=f"profile-{run}",
            gpu=GpuInfo(name=args.device),
            device=args.device,
            secret_seed=None,
            default_timeout_s=480.0,
        )
        began = time.monotonic()
        watched = [name for name in args.who_imports.split(",") if name]
        script = Path(tempfile.mkdtemp()) / "watched_harness.py"
        script.write_text(WATCH.format(watched=watched, repo=str(REPO)))
        done = subprocess.run(
            [sys.executable, "-m", "cProfile", "-s", "cumulative", str(script)],
            input=spec.to_json(),
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=600,
        )
        wall = time.monotonic() - began
        lines = done.stdout.splitlines()
        print(f"## run {run}: {wall:.2f} s wall")
        result = None
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("event") == "result":
                body = message["result"]
                result = Result.from_json(body if isinstance(body, str) else json.dumps(body))
        if result is None:
            print("no result line; stderr tail:", done.stderr[-2000:])
            continue
        print(f"{result.status.value}: {result.verdict}; duration {result.duration_s:.2f} s")
        print("phases:", json.dumps(result.phases_s))
        print("### where the harness first imported", ", ".join(watched))
        print(
            done.stderr[done.stderr.find("=== first import") :][:6000]
            if "=== first import" in done.stderr
            else "(none)"
        )
        print("### the harness's profile")
        at = next((i for i, line in enumerate(lines) if "function calls" in line and not line.startswith("{")), None)
        print(top_rows(lines, at, args.top))
        print("### the submission's process's profile")
        child = result.stdout.splitlines()
        at = next((i for i, line in enumerate(child) if "function calls" in line), None)
        print(top_rows(child, at, args.top) if at is not None else "(none)\n" + result.stdout[-1500:])
    return 0


# The harness as ``python -m kernelcup.harness`` runs it, with an audit hook that prints the stack
# where each watched module is first imported.
WATCH = """
import runpy, sys, traceback
sys.path.insert(0, {repo!r})
watched = set({watched!r})
def hook(event, args):
    if event == "import" and args[0] in watched:
        watched.discard(args[0])
        print("=== first import of", args[0], file=sys.stderr)
        frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith("<")]
        print("".join(traceback.format_list(frames)), file=sys.stderr, flush=True)
sys.addaudithook(hook)
runpy.run_module("kernelcup.harness", run_name="__main__", alter_sys=True)
"""


def top_rows(lines: list[str], at: int | None, top: int) -> str:
    """The profile's header and its first ``top`` rows that are not the import machinery."""
    if at is None:
        return "(none)"
    rows = [line for line in lines[at + 5 :] if line.strip() and "importlib" not in line and "<frozen" not in line]
    return "\n".join(lines[at : at + 5] + rows[:top])


if __name__ == "__main__":
    sys.exit(main())
