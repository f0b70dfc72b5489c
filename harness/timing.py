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
cost (the 90th percentile of recent calls') on top of the submission's own launch time; what
the sleep has left when the call starts (launches and joins) hides at most ``MAX_SLEEP_NS`` of
the call's host time, as without the fence. They cost about 0.9 ms per call on the H100 for
its 128 pool streams (2.4 µs per driver call, whether through torch's bindings or straight to
the driver through ``ctypes``, which is used where it loads): wall time, not timed time.
"""

from __future__ import annotations

import ctypes
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
FENCE_WINDOW = 50  # the sleep covers the 90th percentile of the last this many calls' fence costs
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
        self._side = SideStreams(device_index, self._start, event_type)
        self._fence_ns: list[float] = []  # host time of recent calls' fence and marks (before the call)
        self._join_ns: list[float] = []  # ...and of their joins (after it)

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
        if self._flush_buffer is not None:
            # Again, now that the warm-up has ramped the clocks up: the first calibration ran on
            # an idle GPU (345 MHz on the H100 against 1980 under load) and would make the sleep
            # several times shorter than asked.
            self._cycles_per_ns = self._calibrate_sleep()
        fence, joins = _p90(self._fence_ns[-FENCE_WINDOW:]), _p90(self._join_ns[-FENCE_WINDOW:])
        # The sleep covers the fence before the call, the call's launches and the joins after
        # it; what is left of it when the call starts (launches + joins) hides the call's host
        # time, never more than MAX_SLEEP_NS of it.
        launches = min(MAX_SLEEP_NS - joins, max(MIN_SLEEP_NS, 1.5 * _p90(host_ns) + MIN_SLEEP_NS))
        self.sleep_ns = float(fence + max(launches, MIN_SLEEP_NS) + joins)

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
        self._side.fence()
        t1 = self._now()
        output = function(data)
        t2 = self._now()
        self._side.join()
        joined_at = self._now()
        self._record(self._end, self._stream)
        self._synchronize()
        t3 = self._now()
        self._fence_ns.append(float(t1 - fence))
        self._join_ns.append(float(joined_at - t2))
        if len(self._fence_ns) > 4 * FENCE_WINDOW:
            del self._fence_ns[:-FENCE_WINDOW], self._join_ns[:-FENCE_WINDOW]
        event_ns = max(self._elapsed_ms(self._start, self._end) * 1e6, self._side.busy_until_ns())
        return Reading(output, event_ns, float(t3 - t0), float(t2 - t1))


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] if ordered else 0.0


class SideStreams:
    """The fence and the joins on every pool stream, issued straight to the CUDA driver.

    Each stream waits for the timer's start event and marks when it may run; after the call a
    join event on it says when its share of the call ended. Falls back to torch's bindings
    where the driver library cannot be loaded."""

    def __init__(self, device_index: int, start: Any, event_type: Any) -> None:
        self._streams = _pool_streams(device_index)
        self._start = start
        self._marks = [event_type(enable_timing=True) for _ in self._streams]
        self._joins = [event_type(enable_timing=True) for _ in self._streams]
        self._torch_wait: Callable[[Any, Any], None] = event_type.wait
        self._torch_record: Callable[[Any, Any], None] = event_type.record
        self._torch_elapsed: Callable[[Any, Any], float] = event_type.elapsed_time
        self._driver = _driver_calls()
        if self._driver is not None:
            for event, stream in zip(
                self._marks + self._joins + [start], self._streams * 2 + self._streams[:1], strict=True
            ):
                self._torch_record(event, stream)  # torch makes a CUDA event on its first record
            torch.cuda.synchronize(device_index)
            handle = ctypes.c_void_p
            self._stream_handles = [handle(stream.cuda_stream) for stream in self._streams]
            self._mark_handles = [handle(event.cuda_event) for event in self._marks]
            self._join_handles = [handle(event.cuda_event) for event in self._joins]
            self._start_handle = handle(start.cuda_event)
        self._elapsed = ctypes.c_float()

    def __len__(self) -> int:
        return len(self._streams)

    def fence(self) -> None:
        if self._driver is None:
            for stream, mark in zip(self._streams, self._marks, strict=True):
                self._torch_wait(self._start, stream)
                self._torch_record(mark, stream)
            return
        wait, record = self._driver.wait, self._driver.record
        start = self._start_handle
        for handle, mark_handle in zip(self._stream_handles, self._mark_handles, strict=True):
            wait(handle, start, 0)
            record(mark_handle, handle)

    def join(self) -> None:
        if self._driver is None:
            for stream, joined in zip(self._streams, self._joins, strict=True):
                self._torch_record(joined, stream)
            return
        record = self._driver.record
        for handle, join_handle in zip(self._stream_handles, self._join_handles, strict=True):
            record(join_handle, handle)

    def busy_until_ns(self) -> float:
        """After a synchronize: the latest join, from the start event, among streams that ran
        work in the call (join later than mark by over ``SIDE_WORK_MIN_NS``); 0 if none did."""
        latest = 0.0
        if self._driver is None:
            for mark, joined in zip(self._marks, self._joins, strict=True):
                if self._torch_elapsed(mark, joined) * 1e6 > SIDE_WORK_MIN_NS:
                    latest = max(latest, self._torch_elapsed(self._start, joined) * 1e6)
            return latest
        elapsed, out = self._driver.elapsed, self._elapsed
        pointer = ctypes.byref(out)
        for mark, joined in zip(self._mark_handles, self._join_handles, strict=True):
            worked = elapsed(pointer, mark, joined) == 0 and out.value * 1e6 > SIDE_WORK_MIN_NS
            if worked and elapsed(pointer, self._start_handle, joined) == 0:
                latest = max(latest, out.value * 1e6)
        return latest


@dataclass(frozen=True)
class _Driver:
    wait: Callable[..., int]
    record: Callable[..., int]
    elapsed: Callable[..., int]


def _driver_calls() -> _Driver | None:
    """cuStreamWaitEvent, cuEventRecord and cuEventElapsedTime from the driver library, whose
    handles are the runtime's (torch's ``cuda_stream`` and ``cuda_event``); None if absent."""
    try:
        library = ctypes.CDLL("libcuda.so.1")
        wait = library.cuStreamWaitEvent
        record = library.cuEventRecord
        elapsed = library.cuEventElapsedTime
    except (OSError, AttributeError):
        return None
    handle = ctypes.c_void_p
    wait.argtypes, wait.restype = [handle, handle, ctypes.c_uint], ctypes.c_int
    record.argtypes, record.restype = [handle, handle], ctypes.c_int
    elapsed.argtypes, elapsed.restype = [ctypes.POINTER(ctypes.c_float), handle, handle], ctypes.c_int
    return _Driver(wait, record, elapsed)


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
