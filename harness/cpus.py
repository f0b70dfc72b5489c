"""CPU cores for timing: the child's calling thread and the harness's reading thread each on a
core of its own, the same cores for every job on a GPU.

Host-bound submissions (many small launches, ``.item()``, a tensor built from a Python list
every call) run at the speed of the core their process happens to land on. On a 16-core H100
machine, unpinned, the same submission ranked twice back to back read 270 µs in one job and
375 µs in the next, both rounds of each job agreeing: something chosen per job, as the cores
are. Pinned, every job of a GPU times on the same two cores. Whether that removes such swings
is not proven yet (harness/NOTES.md, "Timing cores", has the figures).

Only the two timing threads are pinned, and the child's only from its first timed call: the
submission's loading, compiling and warm-up (Triton, ``torch.compile``'s workers) keep every
core. ``KERNELCUP_HARNESS_CPUS``: ``auto`` (the default: on machines of 4 or more usable cores,
the last two cores, CPU 0 left to interrupts, the next two down for each further GPU slot),
``off``, or ``HARNESS,CHILD`` (two core numbers).
"""

from __future__ import annotations

import os

ENV = "KERNELCUP_HARNESS_CPUS"
MIN_CORES = 4  # below this the scheduler's own choice is left alone (CI's 2-core boxes)


def timing_cpus() -> tuple[int, int] | None:
    """(the harness's core, the child's core), or None: leave both where the scheduler puts them."""
    choice = os.environ.get(ENV, "auto").strip().lower()
    try:
        usable = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if choice in ("", "off", "none", "0"):
        return None
    if choice != "auto":
        try:
            harness, child = (int(part) for part in choice.split(","))
        except ValueError:
            return None
        return (harness, child) if harness != child and {harness, child} <= set(usable) else None
    if len(usable) < MIN_CORES:
        return None
    spare = usable[1:]
    slot = gpu_slot()
    if len(spare) < 2 * (slot + 1):
        slot %= max(1, len(spare) // 2)
    return spare[-2 - 2 * slot], spare[-1 - 2 * slot]


def gpu_slot() -> int:
    """Which of the machine's GPUs this job has (the first visible one), so that jobs on
    different GPUs of one machine time on different cores; 0 when unknown."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def pin_this_thread(cpu: int) -> bool:
    """Keep the calling thread on ``cpu`` (Linux: a thread's own affinity); False where refused."""
    try:
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError, ValueError):
        return False
    return True
