"""What turning torch's kernel cache off costs a job's GPU process (harness/process.py,
``NO_KERNEL_CACHE``): the harness's launch-hiding sleep (harness/timing.py, ``_WideSleep``) is
an NVRTC build, kept in ``~/.cache/torch/kernels`` when the cache is on.

Each sample is a fresh ``python -P -s`` process, as the harness starts one, that imports torch,
starts CUDA and builds the sleep; the process reports the build's own time and the whole
start-up. Three ways, interleaved so that a drift of the machine falls on all of them alike:

- ``cache off``   USE_PYTORCH_KERNEL_CACHE=0 (what a job's process does now)
- ``cache warm``  the cache on, in a HOME where an earlier process already built the sleep
- ``cache cold``  the cache on, in a fresh HOME (the first process of a job before the change)

    python3 bench/gpu/kernel_cache_cost.py [--samples 8]      # on the GPU machine, repo root

Prints one JSON line per way (median and range in ms) and writes them to $OUT/kernel_cache_cost.json
when OUT is set.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROBE = """
import time
t0 = time.perf_counter()
import torch
torch.cuda.init()
torch.zeros(1, device="cuda")
t1 = time.perf_counter()
from kernelcup.harness.timing import _WideSleep
sleep = _WideSleep.build(0)
torch.cuda.synchronize()
t2 = time.perf_counter()
assert sleep is not None, "no NVRTC sleep on this machine"
print(f"{(t1 - t0) * 1e3:.3f} {(t2 - t1) * 1e3:.3f}")
"""

REPO = Path(__file__).resolve().parents[2]


def sample(home: Path, cache_on: bool) -> tuple[float, float]:
    unset = ("XDG_CACHE_HOME", "PYTORCH_KERNEL_CACHE_PATH")
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env["HOME"] = str(home)
    env["USE_PYTORCH_KERNEL_CACHE"] = "1" if cache_on else "0"
    done = subprocess.run(
        [sys.executable, "-P", "-s", "-c", PROBE], env=env, cwd=REPO, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise SystemExit(f"probe failed: {done.stderr[-2000:]}")
    start_ms, build_ms = (float(part) for part in done.stdout.split()[-2:])
    return start_ms, build_ms


def summary(name: str, values: list[tuple[float, float]]) -> dict[str, object]:
    builds = [build for _, build in values]
    starts = [start for start, _ in values]
    return {
        "way": name,
        "samples": len(values),
        "build_ms_median": round(statistics.median(builds), 2),
        "build_ms_range": [round(min(builds), 2), round(max(builds), 2)],
        "torch_start_ms_median": round(statistics.median(starts), 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=8)
    args = parser.parse_args()
    ways: dict[str, list[tuple[float, float]]] = {"cache off": [], "cache warm": [], "cache cold": []}
    with tempfile.TemporaryDirectory() as scratch:
        warm_home = Path(scratch) / "warm"
        warm_home.mkdir()
        sample(warm_home, cache_on=True)  # fills the warm HOME's cache
        for index in range(args.samples):
            ways["cache off"].append(sample(Path(scratch), cache_on=False))
            ways["cache warm"].append(sample(warm_home, cache_on=True))
            cold_home = Path(scratch) / f"cold{index}"
            cold_home.mkdir()
            ways["cache cold"].append(sample(cold_home, cache_on=True))
    rows = [summary(name, values) for name, values in ways.items()]
    for row in rows:
        print(json.dumps(row))
    if os.environ.get("OUT"):
        Path(os.environ["OUT"]).mkdir(parents=True, exist_ok=True)
        (Path(os.environ["OUT"]) / "kernel_cache_cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
