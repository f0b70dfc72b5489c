"""Where the harness's per-call time comes from, outside the harness: two experiments.

    python bench/gpu/timing_probe.py overhead           # event overhead: empty pair, empty kernel
    python bench/gpu/timing_probe.py spread [PROCS]     # run-to-run spread of one process's median

``overhead`` times, with the harness's own ``CudaTimer``, a call that launches nothing, a call
that launches one empty kernel, and vectoradd's Triton solution on its smallest benchmark case,
each on fresh inputs after the harness's L2 flush. Run it under ``ncu --metrics
gpu__time_duration.sum`` (``--profile-from-start off``) for the kernel's own time: the profiled
range holds the empty kernel and the vectoradd calls only.

``spread`` starts PROCS fresh processes per (case, placement) and prints each one's median over
400 timed calls: same code, same GPU, so the spread is what a re-run can move. ``placement``
``fixed`` lets the caching allocator hand every call the same blocks, as it does in a plain
loop; ``varied`` holds spacers of random number and size while each call's inputs are made and
used, so every call sees its buffers somewhere else. ``PROBE_CASES=histogram`` and
``PROBE_PLACEMENTS=fixed`` narrow the run. ``PROBE_SLEEP=thread`` times with torch's one-thread
sleep instead of the GPU-wide one (is a mode the wide sleep's doing?). ``PROBE_PIN=rotate`` pins
process *i* to CPU *i* (modulo the CPUs it may use) and ``PROBE_PIN=same`` every process to the
last one: does a per-process mode follow the CPU a process runs on? ``PROBE_PIN=timing`` pins
to the harness's own timing core (harness/cpus.py, with its SMT siblings kept idle). Each row
names the CPU each process ended on.

The ``sync`` cases (``PROBE_CASES=item_normalize,pylist_weights,bincount_sync``, the repeat set's
boards that wait on the GPU inside the call) ask how a host that waits and wakes moves a case
from process to process. ``PROBE_SCHED=spin|yield|blocking`` sets the CUDA context's wait mode
(the driver's ``cuDevicePrimaryCtxSetFlags``) before torch makes the context; ``auto`` (unset)
is the driver's own choice. ``PROBE_IDLE_US=N`` blocks N µs between calls, as the submission's
process does between the harness's orders. ``PROBE_SLEEP_US=N`` holds the launch-hiding sleep
at N µs (the harness's cap, which a call that waits on the GPU inside always reaches, is 1,000).
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("vectoradd", "triton.py", {"size": 4096, "seed": 31232}),
    ("softmax", "triton.py", {"rows": 65536, "cols": 1024, "dtype": "float16", "seed": 93246}),
    ("histogram", "triton.py", {"size": 268435456, "bins": 256, "contention": 90, "seed": 93246}),
    ("histogram", "triton.py", {"size": 268435456, "bins": 256, "contention": 10, "seed": 54352}),
    ("grayscale", "triton.py", {"height": 4096, "width": 4096, "seed": 54352}),
    ("prefixsum", "triton.py", {"size": 16777216, "seed": 54352}),
    ("identity", "triton.py", {"size": 16777216, "seed": 54352}),
    ("identity", "triton.py", {"size": 67108864, "seed": 93246}),
    ("item_normalize", "pytorch.py", {"size": 4096, "seed": 11}),
    ("pylist_weights", "pytorch.py", {"size": 512, "seed": 12}),
    ("bincount_sync", "pytorch.py", {"size": 10000, "seed": 11}),
]
SCHED_FLAGS = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}  # CU_CTX_SCHED_*
CALLS = 400


def load(board: str, solution: str) -> tuple[Any, Any]:
    folder = REPO / "leaderboards" / board
    if not folder.is_dir():
        folder = REPO / "bench" / "gpu" / "repeat" / board
    os.chdir(folder)
    sys.path[:0] = [str(folder), str(folder.parent), str(REPO)]
    import reference  # type: ignore[import-not-found]

    namespace: dict[str, Any] = {"__name__": "submission"}
    path = folder / "solutions" / solution
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return reference, namespace["custom_kernel"]


def spacers(rng: random.Random) -> list[Any]:
    """Up to 63 small allocations (the caching allocator's small pool: a block freed by the last
    call no longer fits the next one first) and one of 1-33 MiB (the large pool)."""
    import torch

    held = [
        torch.empty(rng.randrange(1, 9) * 512, dtype=torch.uint8, device="cuda") for _ in range(rng.randrange(0, 64))
    ]
    large = (rng.randrange(1, 33) << 20) + rng.randrange(0, 2048) * 512
    held.append(torch.empty(large, dtype=torch.uint8, device="cuda"))
    return held


def pin(process: int) -> None:
    mode = os.environ.get("PROBE_PIN", "")
    allowed = sorted(os.sched_getaffinity(0))
    if mode == "rotate":
        os.sched_setaffinity(0, {allowed[process % len(allowed)]})
    elif mode == "same":
        os.sched_setaffinity(0, {allowed[-1]})
    elif mode == "timing":
        from kernelcup.harness import cpus

        chosen = cpus.timing_cpus()
        if chosen is not None:
            os.sched_setaffinity(0, {chosen[1]})


def set_sched() -> None:
    """The primary context's wait mode, before torch creates it (driver API through ctypes)."""
    name = os.environ.get("PROBE_SCHED", "auto")
    if name == "auto":
        return
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    device = ctypes.c_int()
    assert cuda.cuInit(0) == 0 and cuda.cuDeviceGet(ctypes.byref(device), 0) == 0
    code = cuda.cuDevicePrimaryCtxSetFlags(device, SCHED_FLAGS[name])
    assert code == 0, f"cuDevicePrimaryCtxSetFlags: {code}"


def cpu_mhz(cpu: int) -> float:
    """The kernel's idea of ``cpu``'s clock now (0 where it has none)."""
    try:
        return int(Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq").read_text()) / 1000
    except (OSError, ValueError):
        return 0.0


def current_cpu() -> int:
    fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[36])  # field 39 of stat(5), counted after the command name


def one_process(index: int, placement: str, process: int = 0) -> int:
    pin(process)
    set_sched()
    idle_s = float(os.environ.get("PROBE_IDLE_US", "0")) / 1e6
    from kernelcup.harness import timing
    from kernelcup.harness.timing import CudaTimer, warm_up

    if os.environ.get("PROBE_SLEEP_US"):
        timing.MAX_SLEEP_NS = int(float(os.environ["PROBE_SLEEP_US"]) * 1000)
    if os.environ.get("PROBE_SLEEP") == "thread":
        timing._WideSleep.build = staticmethod(lambda device_index: None)  # type: ignore[method-assign]
    board, solution, case = CASES[index]
    reference, kernel = load(board, solution)
    timer = CudaTimer(0)
    rng = random.Random()
    warm_up(timer, kernel, lambda: reference.generate_input(**case, device="cuda"), 0.1, 1.0)
    times = []
    hosts = []
    for call in range(CALLS):
        spacer = spacers(rng) if placement == "varied" else None
        data = reference.generate_input(**{**case, "seed": case["seed"] + call}, device="cuda")
        if idle_s:
            timer.synchronize()
            time.sleep(idle_s)
        reading = timer.time_call(kernel, data)
        times.append(reading.event_ns)
        hosts.append(reading.host_ns)
        del data, reading, spacer
    half = CALLS // 2
    print(
        json.dumps(
            {
                "median": statistics.median(times),
                "p10": statistics.quantiles(times, n=10)[0],
                "p90": statistics.quantiles(times, n=10)[-1],
                "first_half": statistics.median(times[:half]),
                "second_half": statistics.median(times[half:]),
                "sleep_us": timer.sleep_ns / 1000,
                "host_us": statistics.median(hosts) / 1000,
                "host_over_sleep": sum(h > timer.sleep_ns for h in hosts) / len(hosts),
                "cpu": current_cpu(),
                "mhz": cpu_mhz(current_cpu()),
            }
        )
    )
    return 0


def spread(procs: int) -> int:
    only = os.environ.get("PROBE_CASES")
    placements = os.environ.get("PROBE_PLACEMENTS", "fixed,varied").split(",")
    for index, (board, _, case) in enumerate(CASES):
        if only and board not in only.split(","):
            continue
        for placement in placements:
            medians = []
            tails = []
            halves = []
            hosts = []
            cpus = []
            for process in range(procs):
                out = subprocess.run(
                    [sys.executable, __file__, "one", str(index), placement, str(process)],
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if out.returncode != 0:
                    print(out.stderr[-2000:])
                    return 1
                row = json.loads(out.stdout.strip().splitlines()[-1])
                medians.append(row["median"] / 1000)
                tails.append(f"{row['p10'] / 1000:.1f}-{row['p90'] / 1000:.1f}")
                halves.append(abs(row["first_half"] - row["second_half"]) / row["median"] * 100)
                hosts.append(f"{row['host_us']:.0f}/{row['sleep_us']:.0f}/{row['host_over_sleep']:.2f}")
                cpus.append(f"{row['cpu']}@{row['mhz']:.0f}")
            lo, hi = min(medians), max(medians)
            print(
                f"{board} {json.dumps(case)} {placement} sched={os.environ.get('PROBE_SCHED', 'auto')} "
                f"idle={os.environ.get('PROBE_IDLE_US', '0')} sleep={os.environ.get('PROBE_SLEEP_US', 'auto')}: "
                "medians µs "
                + ", ".join(f"{m:.2f}" for m in medians)
                + f" | spread {100 * (hi - lo) / lo:.2f}% | p10-p90 µs "
                + ", ".join(tails)
                + f" | in-process halves max {max(halves):.2f}%"
                + " | host µs/sleep µs/share over: "
                + ", ".join(hosts)
                + " | cpu: "
                + ", ".join(cpus),
                flush=True,
            )
    return 0


def overhead() -> int:
    import torch

    from kernelcup.harness.timing import CudaTimer

    reference, kernel = load("vectoradd", "triton.py")
    torch.cuda.init()  # type: ignore[no-untyped-call]
    built = time.perf_counter()
    timer = CudaTimer(0)
    built_s = time.perf_counter() - built
    fences: list[float] = []
    sleep = torch._C._cuda_sleep

    def nothing(data: Any) -> None:
        return None

    def empty(data: Any) -> None:
        sleep(0)

    case = CASES[0][2]
    results = {}
    profile = os.environ.get("PROBE_PROFILE") == "1"
    for name, function in (("no launch", nothing), ("empty kernel", empty), ("vectoradd 4096", kernel)):
        times = []
        for call in range(300):
            data = reference.generate_input(**{**case, "seed": case["seed"] + call}, device="cuda")
            profiled = profile and call >= 280 and name != "no launch"
            if profiled:
                timer.flush_l2()
                torch.cuda.synchronize()
                torch.cuda.profiler.start()  # type: ignore[no-untyped-call]
                function(data)
                torch.cuda.synchronize()
                torch.cuda.profiler.stop()  # type: ignore[no-untyped-call]
            else:
                reading = timer.time_call(function, data)
                times.append(reading.event_ns)
                fences.append(timer._join_ns[-1])
                if call == 2:  # as the harness's warm-up does: the sleep covers launches and the fence
                    timer.set_sleep_for([reading.host_ns])
        results[name] = statistics.median(times) / 1000
    # The same without the sleep kernel: the start event fires on an idle GPU.
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    for name, function in (("no launch, no sleep", nothing), ("empty kernel, no sleep", empty)):
        times = []
        for _ in range(300):
            timer.flush_l2()
            start.record()
            function(None)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) * 1e6)
        results[name] = statistics.median(times) / 1000
    for name, value in results.items():
        print(f"{name}: median {value:.3f} µs")
    # The side-stream fence (harness/timing.py): how many pool streams it covers, what finding
    # them costs at the timer's start, and its host time per call (which the sleep covers).
    side = timer._side
    print(
        f"GPU-wide sleep: {timer.side_streams_timed}; {len(side) if side else 0} pool streams found; "
        f"timer built in {built_s * 1000:.1f} ms; host time of the after-call queries per call: median "
        f"{statistics.median(fences) / 1000:.1f} µs, max {max(fences) / 1000:.1f} µs"
    )
    # The same three calls with torch's one-thread sleep, for comparison.
    from kernelcup.harness.timing import _ThreadSleep

    timer._sleep, timer._side = _ThreadSleep(torch._C._cuda_sleep), None
    timer._sleep.calibrate(timer._measure)
    for name, function in (("no launch", nothing), ("vectoradd 4096", kernel)):
        times = []
        for call in range(300):
            data = reference.generate_input(**{**case, "seed": case["seed"] + call}, device="cuda")
            reading = timer.time_call(function, data)
            times.append(reading.event_ns)
            if call == 2:
                timer.set_sleep_for([reading.host_ns])
        print(f"{name}, one-thread sleep: median {statistics.median(times) / 1000:.3f} µs")
    return 0


def main() -> int:
    command = sys.argv[1]
    if command == "overhead":
        return overhead()
    if command == "spread":
        return spread(int(sys.argv[2]) if len(sys.argv) > 2 else 5)
    if command == "one":
        return one_process(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 0)
    raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":
    t = time.monotonic()
    code = main()
    print(f"({time.monotonic() - t:.1f} s)", file=sys.stderr)
    sys.exit(code)
