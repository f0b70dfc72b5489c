"""Does a large memory-bound call's speed depend on where its buffers sit, or on their values?

    python bench/gpu/placement_probe.py [--size 10000] [--allocs 24] [--processes 6]

On a machine with CUDA. Times ``torch.add(a, b, out=c)`` on ``(size, size)`` float16 matrices
(vectoradd's largest case) with CUDA events, 25 calls per reading, median:

- ``allocations``: new buffers each time (the caching allocator emptied, and a ballast of a
  varying number of 2 MiB blocks held so the driver hands out other memory), the same values;
- ``values``: the same buffers refilled with other random values, and with zeros;
- ``processes``: fresh processes, each reading its first allocation as a harness round would;
- ``offsets``: the three matrices carved out of one buffer with their starts moved by 512 B to
  1 MiB from 2 MiB boundaries (as the caching allocator places a tensor in the split-off tail
  of a larger cached block), with ``torch.add`` and with vectoradd's Triton kernel.

Why: vectoradd's 10000² case read 228.9 µs in both rounds (fresh processes) of one ranked job
and 200.5 µs in both of the next, with a few calls of each job at the other speed
(bench/gpu/results/2026-11-26-h100-session7.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

MIB = 2**20


def reading(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> float:
    return reading_with(lambda: torch.add(a, b, out=c))


def buffers(size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen)
    return a, b, torch.empty_like(a)


def allocations(size: int, count: int) -> list[dict[str, Any]]:
    rows = []
    ballast: list[torch.Tensor] = []
    for i in range(count):
        torch.cuda.empty_cache()
        ballast.append(torch.empty((i % 5 + 1) * 2**20, device="cuda", dtype=torch.uint8))
        a, b, c = buffers(size, 1)
        rows.append({"alloc": i, "a_ptr_mib": a.data_ptr() / 2**20, "us": reading(a, b, c)})
        del a, b, c
    return rows


def values(size: int) -> list[dict[str, Any]]:
    a, b, c = buffers(size, 1)
    rows = []
    for seed in range(6):
        gen = torch.Generator(device="cuda").manual_seed(100 + seed)
        a.copy_(torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen))
        b.copy_(torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen))
        rows.append({"values": f"seed {100 + seed}", "us": reading(a, b, c)})
    a.zero_()
    b.zero_()
    rows.append({"values": "zeros", "us": reading(a, b, c)})
    return rows


def offsets(size: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "leaderboards" / "vectoradd"))
    sys.modules.setdefault("task", type(sys)("task"))
    sys.modules["task"].input_t = sys.modules["task"].output_t = object  # type: ignore[attr-defined]
    from solutions.triton import custom_kernel  # type: ignore[import-not-found]

    n = size * size
    span = (n * 2 + 4 * MIB + MIB - 1) // MIB * MIB
    pool = torch.empty(3 * span, device="cuda", dtype=torch.uint8)
    gen = torch.Generator(device="cuda").manual_seed(7)
    rows: list[dict[str, Any]] = []
    for shift_a, shift_b, shift_c in [
        (0, 0, 0),
        (512, 0, 0),
        (0, 512, 1024),
        (4096, 8192, 0),
        (65536, 0, 65536),
        (0, MIB, 0),
        (MIB, MIB, MIB),
        (1536, 2048, 2560),
        (0, 0, 512),
        (0, 0, 0),
    ]:
        views = []
        for i, shift in enumerate((shift_a, shift_b, shift_c)):
            start = i * span + shift
            views.append(pool[start : start + n * 2].view(torch.float16).view(size, size))
        a, b, c = views
        a.copy_(torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen))
        b.copy_(torch.randn(size, size, device="cuda", dtype=torch.float16, generator=gen))
        plain = reading(a, b, c)
        inputs = (a, b, c)
        tri = reading_with(lambda: custom_kernel(inputs))  # noqa: B023 (called at once)
        rows.append({"shifts": (shift_a, shift_b, shift_c), "add": plain, "triton": tri})
    return rows


def reading_with(call: Callable[[], object], calls: int = 25) -> float:
    """The median of ``calls`` back-to-back calls, each between two CUDA events, in µs."""
    times = []
    for _ in range(calls):
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        call()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10000)
    parser.add_argument("--allocs", type=int, default=24)
    parser.add_argument("--processes", type=int, default=6)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(allocations(args.size, 2)))
        return
    print(torch.cuda.get_device_name(0))
    rows = allocations(args.size, args.allocs)
    for row in rows:
        print(f"allocation {row['alloc']:2d}: a at {row['a_ptr_mib']:9.0f} MiB  {row['us']:7.1f} µs")
    for row in values(args.size):
        print(f"same buffers, {row['values']:>9}: {row['us']:7.1f} µs")
    for row in offsets(args.size):
        print(f"offsets a, b, c {row['shifts']} B: add {row['add']:7.1f} µs, Triton {row['triton']:7.1f} µs")
    for p in range(args.processes):
        out = subprocess.run(
            [sys.executable, __file__, "--child", "--size", str(args.size)], capture_output=True, text=True, check=True
        )
        child = json.loads(out.stdout)
        print(f"process {p}: " + ", ".join(f"{r['us']:.1f} µs (a at {r['a_ptr_mib']:.0f} MiB)" for r in child))


if __name__ == "__main__":
    main()
