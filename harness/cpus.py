"""A CPU core for timing: the child's calling thread on a core of its own, the same core for
every job on a GPU, and the harness's thread on every other core.

Host-bound submissions (many small launches, ``.item()``, a tensor built from a Python list
every call) run at the speed of the core their process happens to land on. On a 16-core H100
machine, unpinned, the same submission ranked twice back to back read 270 µs in one job and
375 µs in the next, both rounds of each job agreeing: something chosen per job, as the cores
are. Pinned, every job of a GPU times on the same core. Whether that removes such swings is not
proven yet (harness/NOTES.md, "Timing cores", has the figures).

Only the child's calling thread is held to one core, and only from its first timed call: the
submission's loading, compiling and warm-up (Triton, ``torch.compile``'s workers) keep every
core. The harness's thread only leaves that core alone, so whatever it starts later (CPU
threads of a leaderboard's check) still has the rest. ``KERNELCUP_HARNESS_CPUS``: ``auto``
(the default: on machines of 4 or more usable cores, the last core, CPU 0 left to interrupts,
the next one down for each further GPU slot), ``off``, or a core number.
"""

from __future__ import annotations

import os

ENV = "KERNELCUP_HARNESS_CPUS"
MIN_CORES = 4  # below this the scheduler's own choice is left alone (CI's 2-core boxes)


def _process_cores() -> frozenset[int]:
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset()


# The cores this process may use, read once when it starts: the harness's own thread is pinned
# at its job's first timed call, and every later process of the job (a fresh one per ranked
# round) must be given the same core, not one chosen from what that pin left.
PROCESS_CORES = _process_cores()


def timing_cpus() -> tuple[set[int], int] | None:
    """(the harness's cores, the child's core), or None: leave both where the scheduler puts them."""
    choice = os.environ.get(ENV, "auto").strip().lower()
    usable = sorted(PROCESS_CORES)
    if not usable or choice in ("", "off", "none"):
        return None
    if choice == "auto":
        if len(usable) < MIN_CORES:
            return None
        spare = usable[1:]
        child = spare[-1 - gpu_slot() % len(spare)]
    elif choice.isdigit() and int(choice) in usable and len(usable) > 1:
        child = int(choice)
    else:
        return None
    return set(usable) - {child}, child


def gpu_slot() -> int:
    """Which of the machine's GPUs this job has (the first visible one), so that jobs on
    different GPUs of one machine time on different cores; 0 when unknown."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def this_thread_cores() -> list[int]:
    """The cores the calling thread may run on now (empty where the system cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


def describe(child: list[int], harness: set[int]) -> str:
    """One line for the result: where the timed calls ran."""
    where = ",".join(str(c) for c in child) if child else "unknown"
    return f"timed calls on CPU {where}, the harness's thread on {len(harness)} other cores"


def pin_this_thread(cores: set[int]) -> bool:
    """Keep the calling thread on ``cores`` (Linux: a thread's own affinity); False where refused."""
    try:
        os.sched_setaffinity(0, cores)
    except (AttributeError, OSError, ValueError):
        return False
    return True
