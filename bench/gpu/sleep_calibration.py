"""The timer's launch-hiding sleep: how its calibration reads, and whether a wrong one heals.

    python bench/gpu/sleep_calibration.py

On a machine with CUDA, from the repository root (the wheels of ``bench/gpu/wheels.sh`` on
PYTHONPATH, as for ``run_all.py``). It prints:

- a 50 µs sleep as ``CudaTimer._measure`` reads it, with and without the lead sleep, plain and
  with the host held up for 40 µs before the sleep's launch (the lead should hide the hold-up);
- a 16,384-element add timed 200 times with the calibration right and 30x off (every sleep
  far shorter than asked, as a held-up calibration leaves it): how many times the timer
  measured the sleep again, the first calls, and the median of the rest (it should match the
  right calibration's).

Why: on two H100s, a 2.8 µs add read 40.8 µs for one whole case in both rounds of a job, its
no-op calls 32.7 µs (bench/gpu/results/2026-11-26-h100-session6.md).
"""

from __future__ import annotations

import statistics
import time

from script_paths import REPO  # noqa: F401  (first: the repository on the path)

# isort: split
import torch

from kernelcup.harness import timing


def busy(microseconds: float) -> None:
    end = time.perf_counter_ns() + microseconds * 1000
    while time.perf_counter_ns() < end:
        pass


def held_up(sleep: timing._Sleep) -> None:
    busy(40)
    sleep.run(50_000.0)


def main() -> None:
    timer = timing.CudaTimer(0)
    timer.flush_l2()
    sleep = timer._sleep
    if not isinstance(sleep, timing._WideSleep):
        print("the GPU-wide sleep could not be built; the one-thread sleep is timed instead")
    print(f"{torch.cuda.get_device_name(0)}; sleep {type(sleep).__name__}")
    cycles = timing.LEAD_SLEEP_CYCLES
    for lead in (0, cycles):
        timing.LEAD_SLEEP_CYCLES = lead
        plain = [timer._measure(lambda: sleep.run(50_000.0)) for _ in range(5)]
        held = [timer._measure(lambda: held_up(sleep)) for _ in range(5)]
        print(
            f"lead sleep {lead} cycles: a 50 µs sleep reads {statistics.median(plain) / 1e3:.1f} µs; "
            f"with the host held 40 µs before its launch {statistics.median(held) / 1e3:.1f} µs"
        )
    timing.LEAD_SLEEP_CYCLES = cycles
    data = torch.ones(16384, device="cuda")
    for wrong in (1.0, 30.0):
        timer._sleep.calibrate(timer._measure)
        if isinstance(sleep, timing._WideSleep):
            good = sleep._ns_per_unit
            sleep._ns_per_unit = good * wrong
        timer.sleep_ns = 60_000.0
        calls = [timer.time_call(lambda x: x + 1, data) for _ in range(200)]
        readings = [call.event_ns / 1e3 for call in calls]
        print(
            f"calibration off {wrong:g}x: measured again {sum(c.short_sleep for c in calls)} times; first calls "
            f"{[round(r, 1) for r in readings[:5]]} µs; "
            f"median of calls 20-200 {statistics.median(readings[20:]):.2f} µs; "
            f"sleep asked {timer.sleep_ns / 1e3:.0f} µs"
        )


if __name__ == "__main__":
    main()
