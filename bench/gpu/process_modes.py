"""Is a memory-bound case's speed set by where its input sits in GPU memory, or by the process?

    python bench/gpu/process_modes.py [--board vectorsum] [--size 16777216] [--buffers 16]
                                      [--processes 6] [--calls 40]

On a machine with CUDA, from the repository root. Times the board's shipped Triton solution
(``leaderboards/<board>/solutions/triton.py``) the way a timed call runs (L2 flushed by reading
twice its size, a spin kernel ahead of the start event so the launch is hidden, CUDA events):

- ``buffers``: one process, ``--buffers`` inputs alive at once (each its own allocation, so each
  its own physical memory), taken in a new random order on every pass; the median per buffer.
- ``processes``: ``--processes`` fresh processes, each timing one input as a ranked round does;
  the median per process.

Why: vectorsum's 2^24 case on an H100 read 30.14 µs in some of a job's rounds and 30.50 µs in
others, each round a fresh process, and one pair of jobs missed the 1% target by that
(bench/gpu/results/2026-11-27-h100-session11.md). If the buffers spread as the processes do,
the speed goes with the memory an input lands on, and a round that times each call's input in
other memory would average it; if only the processes spread, it is the process. Run it on an
idle machine: beside torch.compile jobs on the other GPU (the host's CPUs busy) the processes
spread 23%.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
SPIN_CYCLES = 200_000  # ~100 µs at 2 GHz: longer than any launch here


def load_kernel(board: str) -> Any:
    folder = ROOT / "leaderboards" / board
    sys.path.insert(0, str(folder))  # its task.py
    spec = importlib.util.spec_from_file_location("probe_solution", folder / "solutions" / "triton.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.custom_kernel


def timed(kernel: Any, data: torch.Tensor, flush: torch.Tensor) -> float:
    """One call in microseconds, as a timed call starts: L2 read-flushed, launch hidden."""
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    flush.sum()
    torch.cuda.synchronize()
    torch.cuda._sleep(SPIN_CYCLES)  # type: ignore[no-untyped-call]
    start.record()
    kernel(data)
    end.record()
    torch.cuda.synchronize()
    return float(start.elapsed_time(end)) * 1000.0


def readings(board: str, size: int, buffers: int, calls: int, seed: int) -> list[float]:
    """The median per buffer, the buffers alive at once and taken in a new order each pass."""
    kernel = load_kernel(board)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2 // 4, device="cuda", dtype=torch.float32).normal_()
    generator = torch.Generator(device="cuda").manual_seed(seed)
    inputs = [torch.randn(size, device="cuda", generator=generator) * 3 + 1 for _ in range(buffers)]
    for data in inputs:  # warm: compile, then once more
        timed(kernel, data, flush)
    times: list[list[float]] = [[] for _ in inputs]
    order = list(range(buffers))
    shuffle = random.Random(seed)
    for _ in range(calls):
        shuffle.shuffle(order)
        for index in order:
            # Written just before its call, as a timed call's inputs are: a buffer last written
            # long ago read up to 55% slower at 2^26 on an H100 (its pages out of the GPU's TLB).
            inputs[index].normal_(generator=generator)
            times[index].append(timed(kernel, inputs[index], flush))
    return [statistics.median(t) for t in times]


def spread(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}-{high:.2f} µs ({(high - low) / low * 100:.2f}%)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--board", default="vectorsum")
    parser.add_argument("--size", type=int, default=1 << 24)
    parser.add_argument("--buffers", type=int, default=16)
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--one", action="store_true", help="internal: one process, print its medians")
    parser.add_argument("--seed", type=int, default=1, help="internal: the inputs' seed")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(readings(args.board, args.size, args.buffers, args.calls, args.seed)))
        return
    medians = readings(args.board, args.size, args.buffers, args.calls, args.seed)
    print(f"buffers, one process: {spread(medians)}; each: {', '.join(f'{m:.2f}' for m in sorted(medians))}")
    per_process: list[float] = []
    for number in range(args.processes):
        command = [sys.executable, __file__, "--one", "--board", args.board, "--size", str(args.size)]
        command += ["--buffers", "1", "--calls", str(4 * args.calls), "--seed", str(args.seed + number + 1)]
        output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        per_process.append(json.loads(output.strip().splitlines()[-1])[0])
    print(f"processes, one input each: {spread(per_process)}; each: {', '.join(f'{m:.2f}' for m in per_process)}")


if __name__ == "__main__":
    main()
