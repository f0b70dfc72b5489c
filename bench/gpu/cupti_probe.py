"""What each source of the GPU's record costs, and whether they agree (issue #36, ``harness/NOTES.md``).

One process per source (CUPTI allows one subscriber per process): ``none`` (no record),
``torch-profiler`` (``record.TorchRecord``) and ``cupti`` (``record.CuptiRecord``), each timing
through the harness's own ``timing.CudaTimer``:

- host time per launch: 5,000 launches of a 4 KiB add, the record on (none: off);
- one timed order (record on, flush, marker, call, synchronize, record off, judged): its wall
  time less the call's, for a 4 KiB add;
- what the record says of a 4 KiB add, a 256 MiB add, a CUDA graph of 50 small kernels, 50 small
  launches, and an add queued on a side stream never joined (each beside CUDA events around it);
- the marker's and the closing synchronize's presence (``complete``).

Run on the GPU machine from the repository root (the core's wheels installed as ``wheels.sh`` says)::

    python3 bench/gpu/cupti_probe.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

import script_paths  # noqa: F401  (first: the repository on the path)

SOURCES = ("none", "torch-profiler", "cupti")


def measure(source: str) -> dict[str, Any]:
    import torch

    from kernelcup.harness import timing

    device = torch.device("cuda:0")
    timer = timing.CudaTimer(0)
    out: dict[str, Any] = {"source": source if source == "none" else timer._record.source}
    small = [torch.ones(1024, device=device), torch.ones(1024, device=device)]
    big = [torch.ones(64 << 20, device=device), torch.ones(64 << 20, device=device)]

    def add(data: list[torch.Tensor]) -> torch.Tensor:
        return data[0] + data[1]

    side = torch.cuda.Stream()  # type: ignore[no-untyped-call]

    def side_add(data: list[torch.Tensor]) -> torch.Tensor:
        with torch.cuda.stream(side):
            return data[0] + data[1]

    def launches(data: list[torch.Tensor]) -> torch.Tensor:
        x = data[0]
        for _ in range(50):
            x = x + 1
        return x

    graph = torch.cuda.CUDAGraph()
    static = [torch.ones(1024, device=device), torch.ones(1024, device=device)]
    capture = torch.cuda.Stream()  # type: ignore[no-untyped-call]
    with torch.cuda.stream(capture):
        launches(static)  # warm the allocator on the capture stream
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        graph_out = launches(static)

    def replay(data: list[torch.Tensor]) -> torch.Tensor:
        graph.replay()
        return graph_out

    for _ in range(50):
        add(small)
    torch.cuda.synchronize()

    # host time per launch
    if source != "none":
        timer._record.start()
    start = time.perf_counter_ns()
    for _ in range(5000):
        add(small)
    torch.cuda.synchronize()
    out["host_us_per_launch"] = (time.perf_counter_ns() - start) / 5000 / 1000
    if source != "none":
        timer._record.stop()

    def events(function: Any, data: Any) -> float:
        first = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        last = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        timer.flush_l2()
        first.record()
        function(data)
        last.record()
        torch.cuda.synchronize()
        return float(first.elapsed_time(last) * 1000.0)

    cases = {"add 4 KiB": (add, small), "add 256 MiB": (add, big), "graph of 50": (replay, None),
             "50 launches": (launches, small), "side stream never joined": (side_add, small)}
    for name, (function, data) in cases.items():
        ev = [events(function, data) for _ in range(30)]
        row: dict[str, Any] = {"events_us": statistics.median(ev)}
        if source != "none":
            readings = [timer.time_call(function, data) for _ in range(30)]
            row["record_us"] = statistics.median(r.time_ns for r in readings) / 1000
            row["activities"] = statistics.median(r.activities for r in readings)
            row["streams"] = max(r.streams for r in readings)
            row["complete"] = all(r.complete for r in readings)
            row["outside_us"] = max(r.outside_ns for r in readings) / 1000
        out[name] = row

    if source != "none":
        overheads = []
        for _ in range(300):
            timer.start_record()
            begin = time.perf_counter_ns()
            reading = timer.time_call(add, small)
            overheads.append((time.perf_counter_ns() - begin - reading.host_ns) / 1000)
        out["order_overhead_us"] = {"median": statistics.median(overheads), "p90": sorted(overheads)[270]}
    if out["source"] == "cupti":  # where an order's cost goes
        cupti = timer._record._cupti  # type: ignore[union-attr]
        flushes, switches = [], []
        timer._record.start()
        for _ in range(100):
            add(small)
            torch.cuda.synchronize()
            begin = time.perf_counter_ns()
            cupti.take()
            flushes.append((time.perf_counter_ns() - begin) / 1000)
        for _ in range(30):
            begin = time.perf_counter_ns()
            cupti.disable()
            cupti.enable()
            switches.append((time.perf_counter_ns() - begin) / 1000)
        out["flush_us"] = statistics.median(flushes)
        out["disable_enable_us"] = statistics.median(switches)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", choices=SOURCES, help="measure one source in this process")
    parser.add_argument("--json", help="write every source's figures here")
    args = parser.parse_args()
    if args.source:
        print(json.dumps(measure(args.source)))
        return 0
    results = []
    for source in SOURCES:
        env = dict(os.environ, KERNELCUP_HARNESS_RECORD=source if source != "none" else "cupti")
        done = subprocess.run([sys.executable, __file__, "--source", source], env=env, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            print(f"{source}: failed\n{done.stderr[-3000:]}")
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for result in results:
        print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(results, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
