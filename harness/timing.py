"""Timing one call of ``custom_kernel``, inside the submission's process.

Every primitive used here (the host clock, device synchronize, CUDA events, the sleep kernel,
stream selection) is captured when this module's timer is built, which happens before the
submission is imported: a submission that later replaces ``time.perf_counter_ns``,
``torch.cuda.synchronize`` or ``torch.cuda.Event.elapsed_time`` changes nothing here. The
captured CUDA functions are C-level methods of extension types, which Python code cannot
patch. Deeper tampering (reaching into this module) is caught by the harness process, which
cross-checks these readings against its own clock (see ``harness/benchmark.py``).

One timed GPU call::

    read-flush L2, synchronize          untimed: the kernel starts with a cold L2
    before()                            tells the harness the call starts (its clock starts)
    t0; sleep kernel; start event       the sleep keeps the GPU busy while the host launches
    fence: every pool stream waits      work the call queues on torch's side streams cannot start
      for the start event, then marks   before the timed region (not during the sleep)
    t1; call custom_kernel; t2          host launch time = t2 - t1
    every pool stream: a join event     when that stream's share of the call ended
    end event; synchronize device; t3   device-wide: work hidden on other streams is waited for
    time = max(end, joins of streams    work left on a side stream counts, joined by the
      that did work) - start            submission or not

The events measure GPU time only: the sleep hides Python's launch overhead (up to its length),
which is what makes the median match Nsight Compute's kernel time for single-kernel
submissions. ``wall = t3 - t0`` minus the same quantity for a no-op call exposes work that
outlives the call on another stream or thread.

The fence and the joins cover torch's stream pools (every ``torch.cuda.Stream()``, and the side
streams of CUDA graphs and ``torch.compile``), which are non-blocking streams: without them a
submission could queue its work on a side stream, let it run during the sleep, and report an
empty default stream. Streams created with ``cudaStreamCreate`` are blocking: they order with
the default stream by themselves. A stream did work in the call when its join came later than
its mark by more than ``SIDE_WORK_MIN_NS`` (any kernel takes longer). Nothing is added to the
timed stream itself, so a call that uses one stream is timed exactly as before; the fence, the
marks and the joins are host work before the end event is issued, so the sleep covers their
measured cost on top of the submission's own launch time (which alone is capped at
``MAX_SLEEP_NS``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from harness import stats

_seconds = time.perf_counter  # captured at import, before any submission is

MIN_SLEEP_NS = 20_000
MAX_SLEEP_NS = 1_000_000
FLUSH_MIN_BYTES = 64 << 20
SIDE_WORK_MIN_NS = 500.0  # a side stream's join this long after its mark: it ran work in the call
POOL_PROBE_MISSES = 40  # a pool hands out its streams round-robin: this many repeats in a row means all seen


def _nothing() -> None:
    return None


@dataclass
class Reading:
    output: Any
    event_ns: float  # GPU time between the events (host time on the CPU)
    wall_ns: float  # host time from before the sleep to after the device synchronize
    host_ns: float  # host time spent inside custom_kernel


class CpuTimer:
    """On the CPU the host clock is the only clock: all three readings are the same."""

    def __init__(self) -> None:
        self._now = time.perf_counter_ns
        self.sleep_ns = 0.0

    def synchronize(self) -> None:
        return None

    def time_call(self, function: Callable[[Any], Any], data: Any, before: Callable[[], None] = _nothing) -> Reading:
        before()
        start = self._now()
        output = function(data)
        elapsed = float(self._now() - start)
        return Reading(output, elapsed, elapsed, elapsed)

    def set_sleep_for(self, host_ns: list[float]) -> None:
        return None

    def time_aligned(self, function: Callable[[Any], Any], data: Any, align: Callable[[], None]) -> Reading:
        """A multi-GPU rank's call: the clock starts when ``align`` (the ranks' barrier) returns."""
        align()
        start = self._now()
        output = function(data)
        elapsed = float(self._now() - start)
        return Reading(output, elapsed, elapsed, elapsed)


class CudaTimer:
    def __init__(self, device_index: int) -> None:
        c = torch._C
        self._now = time.perf_counter_ns
        self._synchronize: Callable[[], None] = c._cuda_synchronize
        self._sleep: Callable[[int], None] = c._cuda_sleep
        self._set_stream: Callable[..., None] = c._cuda_setStream
        event_type: Any = c._CudaEventBase
        self._record: Callable[[Any, Any], None] = event_type.record
        self._elapsed_ms: Callable[[Any, Any], float] = event_type.elapsed_time
        self._start = event_type(enable_timing=True)
        self._end = event_type(enable_timing=True)
        stream_id, device, device_type = c._cuda_getDefaultStream(device_index)
        self._stream_ids = {
            "stream_id": stream_id,
            "device_index": device,
            "device_type": device_type,
        }
        self._stream = torch.cuda.Stream(  # type: ignore[no-untyped-call]
            stream_id=stream_id, device_index=device, device_type=device_type
        )
        tensor_base: Any = getattr(c, "TensorBase", None) or c._TensorBase
        self._sum: Callable[[torch.Tensor], torch.Tensor] = tensor_base.sum
        self._device_index = device_index
        self._flush_buffer: torch.Tensor | None = None  # built on first use: test mode needs none
        self._cycles_per_ns = 0.0
        self.sleep_ns = float(MIN_SLEEP_NS)
        self._wait: Callable[[Any, Any], None] = event_type.wait
        self._side = _pool_streams(device_index)
        self._marks = [event_type(enable_timing=True) for _ in self._side]
        self._joins = [event_type(enable_timing=True) for _ in self._side]
        self._fence_ns = 0.0  # host time of the last call's fence, marks and joins

    def _prepare(self) -> torch.Tensor:
        props = torch.cuda.get_device_properties(self._device_index)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        # Twice the L2 size, read (not written): a read leaves only clean lines behind, so the
        # timed kernel pays no write-back of the flush's own data.
        self._flush_buffer = torch.ones(
            max(2 * l2, FLUSH_MIN_BYTES) // 4, dtype=torch.float32, device=f"cuda:{self._device_index}"
        )
        self._cycles_per_ns = self._calibrate_sleep()
        return self._flush_buffer

    def synchronize(self) -> None:
        self._synchronize()

    def _calibrate_sleep(self) -> float:
        cycles = 200_000
        rates = []
        for _ in range(3):
            self._synchronize()
            self._record(self._start, self._stream)
            self._sleep(cycles)
            self._record(self._end, self._stream)
            self._synchronize()
            elapsed_ns = self._elapsed_ms(self._start, self._end) * 1e6
            if elapsed_ns > 0:
                rates.append(cycles / elapsed_ns)
        return max(rates) if rates else 2.0

    def set_sleep_for(self, host_ns: list[float]) -> None:
        """Size the sleep to cover the submission's host-side launch time (its 90th percentile)."""
        if not host_ns:
            return
        ordered = sorted(host_ns)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        launches = min(MAX_SLEEP_NS, max(MIN_SLEEP_NS, 1.5 * p90 + MIN_SLEEP_NS))
        self.sleep_ns = float(launches + 1.5 * self._fence_ns)

    def flush_l2(self) -> None:
        """Evict L2 by reading twice its size, then wait: the state every timed call starts in."""
        flush_buffer = self._flush_buffer if self._flush_buffer is not None else self._prepare()
        self._set_stream(**self._stream_ids)
        self._sum(flush_buffer)
        self._synchronize()

    def time_call(self, function: Callable[[Any], Any], data: Any, before: Callable[[], None] = _nothing) -> Reading:
        self.flush_l2()
        before()
        t0 = self._now()
        self._sleep(int(self.sleep_ns * self._cycles_per_ns))
        self._record(self._start, self._stream)
        fence = self._now()
        for side, mark in zip(self._side, self._marks, strict=True):
            self._wait(self._start, side)
            self._record(mark, side)
        t1 = self._now()
        output = function(data)
        t2 = self._now()
        for side, joined in zip(self._side, self._joins, strict=True):
            self._record(joined, side)
        joined_at = self._now()
        self._record(self._end, self._stream)
        self._synchronize()
        t3 = self._now()
        self._fence_ns = float((t1 - fence) + (joined_at - t2))
        event_ns = self._elapsed_ms(self._start, self._end) * 1e6
        for mark, joined in zip(self._marks, self._joins, strict=True):
            if self._elapsed_ms(mark, joined) * 1e6 > SIDE_WORK_MIN_NS:
                event_ns = max(event_ns, self._elapsed_ms(self._start, joined) * 1e6)
        return Reading(output, event_ns, float(t3 - t0), float(t2 - t1))


    def time_aligned(self, function: Callable[[Any], Any], data: Any, align: Callable[[], None]) -> Reading:
        """A multi-GPU rank's call (``harness/rank_child.py``): L2 flushed, then ``align`` (the
        ranks' barrier and a synchronize), then the events around the call with the side streams
        fenced as in :meth:`time_call`. No launch-hiding sleep: the barrier is the common start,
        and the primitives are the ones captured before the submission was imported."""
        self.flush_l2()
        align()
        t0 = self._now()
        self._record(self._start, self._stream)
        for side, mark in zip(self._side, self._marks, strict=True):
            self._wait(self._start, side)
            self._record(mark, side)
        t1 = self._now()
        output = function(data)
        t2 = self._now()
        for side, joined in zip(self._side, self._joins, strict=True):
            self._record(joined, side)
        self._record(self._end, self._stream)
        self._synchronize()
        t3 = self._now()
        event_ns = self._elapsed_ms(self._start, self._end) * 1e6
        for mark, joined in zip(self._marks, self._joins, strict=True):
            if self._elapsed_ms(mark, joined) * 1e6 > SIDE_WORK_MIN_NS:
                event_ns = max(event_ns, self._elapsed_ms(self._start, joined) * 1e6)
        return Reading(output, event_ns, float(t3 - t0), float(t2 - t1))


def _pool_streams(device_index: int) -> list[torch.cuda.Stream]:
    """Every stream of torch's pools on this device (each priority's pool, round-robin).

    Asked for before the submission is imported; a stream handle never changes afterwards."""
    low, high = torch.cuda.Stream(device=device_index).priority_range()  # type: ignore[no-untyped-call]
    found: dict[int, torch.cuda.Stream] = {}
    for priority in range(int(low), int(high) - 1, -1):
        misses = 0
        while misses < POOL_PROBE_MISSES:
            stream = torch.cuda.Stream(device=device_index, priority=priority)  # type: ignore[no-untyped-call]
            if stream.cuda_stream in found:
                misses += 1
            else:
                found[stream.cuda_stream] = stream
                misses = 0
    return list(found.values())


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
    sleep_ns: float
    median_ns: float


def warm_up(
    timer: Timer,
    function: Callable[[Any], Any],
    make_data: Callable[[], Any],
    min_seconds: float,
    max_seconds: float,
) -> Warmup:
    """Call until the per-call time is steady (the GPU clock has ramped up), within limits.

    Steady means the medians of the last three batches of five calls agree within 2%. The
    first calls also size the sleep that hides host launch overhead. Each batch gets fresh
    inputs: work a submission ties to its output's lifetime (a finalizer) then comes due a
    batch at a time, as it does for timed calls, instead of piling up on one buffer.
    """
    now = _seconds
    start = now()
    host: list[float] = []
    data = make_data()
    for _ in range(3):
        reading = timer.time_call(function, data)
        host.append(reading.host_ns)
        del reading
    timer.set_sleep_for(host)
    calls = 3
    batch_medians: list[float] = []
    steady = False
    while True:
        del data
        data = make_data()
        batch = []
        for _ in range(5):
            reading = timer.time_call(function, data)
            batch.append(reading.event_ns)
            host.append(reading.host_ns)
            del reading
        calls += 5
        batch_medians.append(stats.median(sorted(batch)))
        if len(batch_medians) >= 3:
            last = batch_medians[-3:]
            steady = max(last) - min(last) <= 0.02 * max(min(last), 1.0)
        elapsed = now() - start
        if (steady and elapsed >= min_seconds) or elapsed >= max_seconds:
            break
    timer.set_sleep_for(host[-20:])
    return Warmup(calls, now() - start, steady, timer.sleep_ns, batch_medians[-1])
