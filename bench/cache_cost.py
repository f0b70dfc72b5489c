"""What the per-job build caches cost `submit test` (issue #37): a job's builds are kept per
(leaderboard, user, source), so the same user's next job of the same code is warm and any other
user's first job of it compiles again.

    python bench/cache_cost.py [--solution FILE] [--leaderboard FOLDER] [--runs 2] [--out FILE]

Each run, on an emptied cache folder, runs three test-mode jobs through the local runner as the
bot runs them (the harness in its sandbox, the submission in one inside it): alice's first job
(cold: it builds), alice's second (warm: her builds are staged back), then bob's first (cold
again: nothing of alice's reaches him). Each line says the job's wall time and the harness's
"sandbox and build caches" phase (staging and keeping the caches). Default: a load_inline
extension (tests/harness/fixtures/submissions/inline_extension.py) on the addmul test board.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelcup.core.pipeline.runner import RunContext  # noqa: E402
from kernelcup.harness.process import CACHE_ENV  # noqa: E402
from kernelcup.harness.spec import Mode, Progress, Result, Status  # noqa: E402
from kernelcup.runners.local import LocalRunner  # noqa: E402
from tests.harness.conftest import LEADERBOARDS, leaderboard_spec, submission  # noqa: E402

JOBS = (("alice, first", "discord:alice"), ("alice, second", "discord:alice"), ("bob, first", "discord:bob"))


async def one_job(folder: Path, source: str, user: str) -> tuple[float, Result]:
    spec = leaderboard_spec(folder, source, Mode.TEST, timeout_s=900, device="cpu")
    spec.leaderboard, spec.user = folder.name, user

    async def progress(event: Progress) -> None:
        return None

    began = time.monotonic()
    result = await LocalRunner(gpu="cpu").run(spec, RunContext(1, "cpu", spec.timeout_s + 120), progress)
    return time.monotonic() - began, result


async def measure(folder: Path, source: str, runs: int) -> dict[str, list[dict[str, float]]]:
    found: dict[str, list[dict[str, float]]] = {name: [] for name, _ in JOBS}
    for run in range(runs):
        cache = Path(tempfile.mkdtemp(prefix="kernelcup-cache-cost-"))
        os.environ[CACHE_ENV] = str(cache)
        try:
            for name, user in JOBS:
                wall_s, result = await one_job(folder, source, user)
                if result.status is not Status.PASSED:
                    raise SystemExit(f"{name}: {result.status.value}: {result.verdict}")
                caches_s = result.phases_s.get("sandbox and build caches", 0.0)
                found[name].append({"wall_s": wall_s, "caches_s": caches_s})
                print(json.dumps({"run": run + 1, "job": name, "wall_s": round(wall_s, 2),
                                  "caches_s": round(caches_s, 3)}), flush=True)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaderboard", type=Path, default=LEADERBOARDS / "addmul")
    parser.add_argument("--solution", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    source = args.solution.read_text() if args.solution else submission("inline_extension.py")
    found = asyncio.run(measure(args.leaderboard, source, args.runs))
    summary = {name: {"median_wall_s": round(statistics.median(r["wall_s"] for r in rows), 2),
                      "median_caches_s": round(statistics.median(r["caches_s"] for r in rows), 3)}
               for name, rows in found.items()}
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps({"runs": found, "summary": summary}, indent=2))


if __name__ == "__main__":
    main()
