"""Timing one call of ``custom_kernel``, inside the submission's process.

On a GPU a call's time is what the GPU itself recorded it doing (``harness/record.py``): from
the start of the first kernel, memcpy or memset the call launched, on any stream and from any
thread, to the end of the last. One timed GPU call::

    record on                           before the inputs are made: other threads' launches
                                        during the order are seen
    read-flush L2, synchronize          untimed: the call starts with a cold L2
    marker kernel; call custom_kernel   what is launched from here on is the call's
    synchronize device                  every stream's work has ended; the call's end in the record
    record off; judge                   the call's span, other threads' work

The host's launch time before the first activity is not timed (nothing ran on the GPU yet);
gaps between activities are (the GPU waited on the host). A call that recorded no activity at
all did its work elsewhere (the host, another process) and is timed by the host clock. Nothing is hidden by a sleep and
nothing needs joining: a side stream's work is in the record like the default stream's.

On the CPU the host clock is the only clock: a call's time is its host time.

Every primitive used here is captured when the timer is built, before the submission is
imported. The captured CUDA functions are C-level methods of extension types, which Python
code cannot patch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelcup.harness import record, stats

_seconds = time.perf_counter  # captured at import, before any submission is

FLUSH_MIN_BYTES = 64 << 20
# The warm-up is steady when its last three batch medians agree within STEADY_SHARE, or within
# STEADY_FLOOR_NS: a call of tens of microseconds is timed there by the host clock to the end of
# its GPU work, and a host launch jitters by microseconds once warm (JOURNAL.md, CUPTI itself,
# rounds started ahead, shorter ranked rounds).
STEADY_SHARE = 0.02
STEADY_FLOOR_NS = 2_000.0
MARKER_CYCLES = 64  # the marker kernel's length: well under a microsecond at any clock


def _nothing() -> None:
    return None


@dataclass
class Reading:
    output: Any
    time_ns: float  # the call's time: its GPU span and other threads' work (GPU), host time (CPU)
    host_ns: float  # host time spent inside custom_kernel
    outside_ns: float = 0.0  # GPU: other threads' work launched outside the call (in time_ns)
    idle_share: float = 0.0  # GPU: share of the span the GPU waited on the host
    waited: bool = False  # GPU: the call waited for the GPU on the host (a sync, .item())
    activities: int = 0
    streams: int = 0
    complete: bool = True  # GPU: the record covers the call (the profiler was left on)


class CpuTimer:
    """On the CPU the host clock is the only clock."""

    def __init__(self) -> None:
        self._now = time.perf_counter_ns

    def synchronize(self) -> None:
        return None

    def start_record(self) -> None:
        return None

    def time_call(self, function: Callable[[Any], Any], data: Any, before: Callable[[], None] = _nothing) -> Reading:
        before()
        start = self._now()
        output = function(data)
        elapsed = float(self._now() - start)
        return Reading(output, elapsed, elapsed)

    def wall_call(self, function: Callable[[Any], Any], data: Any) -> float:
        return self.time_call(function, data).time_ns


class CudaTimer:
    def __init__(self, device_index: int) -> None:
        c = torch._C
        self._now = time.perf_counter_ns
        self._synchronize: Callable[[], None] = c._cuda_synchronize
        self._set_stream: Callable[..., None] = c._cuda_setStream
        stream_id, device, device_type = c._cuda_getDefaultStream(device_index)
        self._stream_ids = {"stream_id": stream_id, "device_index": device, "device_type": device_type}
        tensor_base: Any = getattr(c, "TensorBase", None) or c._TensorBase
        self._sum: Callable[[torch.Tensor], torch.Tensor] = tensor_base.sum
        self._device_index = device_index
        self._flush_buffer: torch.Tensor | None = None  # built on first use: test mode needs none
        self._marker: Callable[[int], None] = c._cuda_sleep
        self._record = record.open_record()

    def _prepare(self) -> torch.Tensor:
        props = torch.cuda.get_device_properties(self._device_index)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        # Twice the L2 size, read (not written): a read leaves only clean lines behind, so the
        # timed kernel pays no write-back of the flush's own data.
        self._flush_buffer = torch.ones(
            max(2 * l2, FLUSH_MIN_BYTES) // 4, dtype=torch.float32, device=f"cuda:{self._device_index}"
        )
        return self._flush_buffer

    def synchronize(self) -> None:
        self._synchronize()

    def flush_l2(self) -> None:
        """Evict L2 by reading twice its size, then wait: the state every timed call starts in."""
        flush_buffer = self._flush_buffer if self._flush_buffer is not None else self._prepare()
        self._set_stream(**self._stream_ids)
        self._sum(flush_buffer)
        self._synchronize()

    def start_record(self) -> None:
        """Switch the record on afresh for the order now starting (before its inputs are made):
        what an order that ended early (an exception) left in it is dropped."""
        if self._record.on:
            self._record.stop()
        self._record.start()

    def time_call(self, function: Callable[[Any], Any], data: Any, before: Callable[[], None] = _nothing) -> Reading:
        """One call, judged from the GPU's record. ``before`` runs after the flush, just before
        the call (a multi-GPU rank's barrier, the "calling" message)."""
        if not self._record.on:
            self._record.start()
        self.flush_l2()
        before()
        self._set_stream(**self._stream_ids)
        self._marker(MARKER_CYCLES)  # opens the call in the record (``record.judge``)
        t1 = self._now()
        try:
            output = function(data)
        except BaseException:
            self._record.stop()
            raise
        t2 = self._now()
        self._synchronize()  # closes it
        activities, launches, still_on = self._record.stop()
        call = record.judge(activities, launches, self._record.main_thread, still_on)
        # A call that put nothing on this process's GPU record did its work elsewhere (on the
        # host, or in another process through shared memory): the host clock is its only record.
        spent = call.time_ns if call.activities else float(t2 - t1)
        return Reading(
            output,
            spent + call.outside_ns,
            float(t2 - t1),
            outside_ns=call.outside_ns,
            idle_share=call.idle_share,
            waited=call.waited,
            activities=call.activities,
            streams=call.streams,
            complete=call.complete,
        )

    def wall_call(self, function: Callable[[Any], Any], data: Any) -> float:
        """Host time of one call to the end of its GPU work, with no record: the warm-up's measure."""
        self._record.pause()
        self.flush_l2()
        start = self._now()
        function(data)
        self._synchronize()
        return float(self._now() - start)


Timer = CpuTimer | CudaTimer


def make_timer(device: torch.device) -> Timer:
    if device.type == "cuda":
        return CudaTimer(device.index or 0)
    return CpuTimer()


@dataclass
class Warmup:
    calls: int
    seconds: float
    steady: bool
    median_ns: float


def warm_up(
    timer: Timer,
    function: Callable[[Any], Any],
    make_data: Callable[[], Any],
    min_seconds: float,
    max_seconds: float,
) -> Warmup:
    """Call until the per-call time is steady (the GPU clock has ramped up, compilers are done),
    within limits.

    Steady means the medians of the last three batches of five calls agree within 2% (or 2 µs). Each
    batch gets fresh inputs: work a submission ties to its output's lifetime (a finalizer) then
    comes due a batch at a time, as it does for timed calls. Calls so long that two of them
    outlast ``max_seconds`` (a batched eigensolver: a second each) are warm after those two: the
    GPU's clock ramps in milliseconds.
    """
    now = _seconds
    start = now()
    first: list[float] = []
    data = make_data()
    for _ in range(3):
        first.append(timer.wall_call(function, data))
        if len(first) >= 2 and now() - start >= max_seconds:
            break
    calls = len(first)
    batch_medians: list[float] = [stats.median(sorted(first))]
    steady = False
    while now() - start < max_seconds:
        del data
        data = make_data()
        batch = sorted(timer.wall_call(function, data) for _ in range(5))
        calls += 5
        batch_medians.append(stats.median(batch))
        if len(batch_medians) >= 4:  # three batches of five, not the first calls
            last = batch_medians[-3:]
            steady = max(last) - min(last) <= max(STEADY_SHARE * min(last), STEADY_FLOOR_NS)
        elapsed = now() - start
        if (steady and elapsed >= min_seconds) or elapsed >= max_seconds:
            break
    return Warmup(calls, now() - start, steady, batch_medians[-1])
