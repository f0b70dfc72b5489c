"""A CPU core for timing: the child's calling thread on a core of its own, the same core for
every job on a GPU, and every other thread of every job kept off the timing cores.

Host-bound submissions (many small launches, ``.item()``, a tensor built from a Python list
every call) run at the speed of the core their process happens to land on, which is chosen per
job as the cores are. Pinned, every job of a GPU times on the same core (JOURNAL.md, Timing
cores, has the figures, and what they do not prove).

A core is reserved per GPU of the machine: the last one for GPU 0, CPU 0 left to interrupts,
the next one down for each further GPU. Where the processor runs two threads per physical core
(SMT), a timing core's sibling shares its pipelines and caches: the reservation then takes whole
physical cores, times on one thread of each and leaves its siblings idle, and the next GPU's core
is the next physical core down. The harness keeps off all of them from its start
(:func:`keep_off_timing_cores`), and so does everything it starts: the submission's processes
(their loading, compiling and threads), a leaderboard's check. From the first benchmark
warm-up, the child's calling thread alone moves onto its GPU's core, so the warm-up runs on the
core that times. Machines where that would
leave fewer than ``MIN_LEFT`` cores to the rest are not pinned. ``KERNELCUP_HARNESS_CPUS``:
``auto`` (the default), ``off``, or a core number (the one timing core).
"""

from __future__ import annotations

import functools
import os

ENV = "KERNELCUP_HARNESS_CPUS"
MIN_CORES = 4  # below this the scheduler's own choice is left alone (CI's 2-core boxes)
MIN_LEFT = 2  # cores left to everything else after the timing cores, CPU 0 aside


def this_thread_cores() -> list[int]:
    """The cores the calling thread may run on now (empty where the system cannot say)."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return []


# The cores this process may use, read once when it starts: the harness then keeps its thread off
# the timing cores, and every later process of the job (a fresh one per ranked round) must be
# given the same core, not one chosen from what that left.
PROCESS_CORES = frozenset(this_thread_cores())


def timing_cpus() -> tuple[set[int], int] | None:
    """(the cores every other thread of the job may use, the child's core), or None: leave the
    threads where the scheduler puts them."""
    reserved = reserved_cores()
    if not reserved:
        return None
    return set(PROCESS_CORES) - held_cores(reserved), reserved[gpu_slot() % len(reserved)]


def held_cores(reserved: list[int]) -> set[int]:
    """The timing cores and their SMT siblings (a timing core is always one of this process's):
    what every other thread keeps off."""
    return {sibling for core in reserved for sibling in siblings(core)} & PROCESS_CORES


@functools.cache
def siblings(core: int) -> frozenset[int]:
    """The logical CPUs of ``core``'s physical core, itself included (Linux sysfs; {core} where
    the system cannot say)."""
    path = f"/sys/devices/system/cpu/cpu{core}/topology/thread_siblings_list"
    try:
        with open(path, encoding="ascii") as listing:
            text = listing.read().strip()
    except OSError:
        return frozenset({core})
    return frozenset((parse_cpu_list(text) or set()) | {core})


def parse_cpu_list(text: str) -> set[int] | None:
    """A kernel CPU list such as ``"3,35"`` or ``"0-1"``; None where it is not one."""
    found: set[int] = set()
    for part in text.strip().split(","):
        low, dash, high = (piece.strip() for piece in part.partition("-"))
        if not low.isdigit() or (dash and not high.isdigit()):
            return None
        found.update(range(int(low), int(high or low) + 1))
    return found


def reserved_cores() -> list[int]:
    """The timing cores of every GPU of this machine, slot by slot (slot 0's first), or none.

    Every job's threads but the timed one keep off all of them, not only off their own GPU's:
    on a machine of several GPUs, each running a job, a harness spinning in a CUDA wait or a
    compile for another GPU's job would otherwise land on this job's timing core, and a thread
    held to one core cannot move away (JOURNAL.md, Timing cores).
    """
    choice = os.environ.get(ENV, "auto").strip().lower()
    usable = sorted(PROCESS_CORES)
    if not usable or choice in ("", "off", "none"):
        return []
    if choice == "auto":
        count = max(machine_gpus(), gpu_slot() + 1)
        if len(usable) < MIN_CORES:
            return []
        taken = set(siblings(usable[0]))  # CPU 0 takes most interrupts: its physical core is left alone
        chosen: list[int] = []
        for core in reversed(usable):  # one whole physical core per GPU, from the last one down
            if len(chosen) == count:
                break
            if core not in taken:
                chosen.append(core)
                taken |= siblings(core)
        held = held_cores(chosen)
        if len(chosen) < count or len(set(usable) - held) - 1 < MIN_LEFT:
            return []
        return chosen
    if choice.isdigit() and int(choice) in usable and len(usable) > 1:
        return [int(choice)]
    return []


def machine_gpus() -> int:
    """How many NVIDIA GPUs this machine has, whatever this process is shown of them (0 if none)."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def keep_off_timing_cores() -> None:
    """At the harness's start, before it starts a thread or a process: this thread, and so
    everything it starts later (the submission's processes, their threads, a check's threads),
    keeps off every timing core. A timed thread is then moved onto its own (:func:`pin_this_thread`)."""
    reserved = reserved_cores()
    if reserved:
        pin_this_thread(set(PROCESS_CORES) - held_cores(reserved))


def gpu_slot() -> int:
    """Which of the machine's GPUs this job has (the first visible one), so that jobs on
    different GPUs of one machine time on different cores; 0 when unknown."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return int(first) if first.isdigit() else 0


def describe(child: list[int], harness: set[int]) -> str:
    """One line for the result: where the timed calls ran, and which of that core's SMT siblings
    were left idle."""
    where = ",".join(str(c) for c in child) if child else "unknown"
    idle = sorted({s for c in child for s in siblings(c)} - set(child) - harness)
    quiet = f" (its sibling CPU {','.join(map(str, idle))} left idle)" if idle else ""
    return f"timed calls on CPU {where}{quiet}, every other thread of the job on {len(harness)} other cores"


def pin_this_thread(cores: set[int]) -> bool:
    """Keep the calling thread on ``cores`` (Linux: a thread's own affinity); False where refused."""
    try:
        os.sched_setaffinity(0, cores)
    except (AttributeError, OSError, ValueError):
        return False
    return True
