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
    t0; GPU-wide sleep; start event     the sleep keeps every SM busy while the host launches
    t1; call custom_kernel; t2          host launch time = t2 - t1
    every pool stream still busy:       work the call left queued on torch's side streams
      a join event on it                (each stream handed out, where the sleep is over or
                                        would not cover the queries of every pool stream)
    end event; synchronize device; t3   device-wide: work hidden on other streams is waited for
    time = max(end, joins) - start      work left on a side stream counts, joined or not

The events measure GPU time only: the sleep hides Python's launch overhead (up to its length),
which is what makes the median match Nsight Compute's kernel time for single-kernel
submissions. ``wall = t3 - t0`` minus the same quantity for a no-op call exposes work that
outlives the call on another stream or thread.

Side streams. torch's pool streams (every ``torch.cuda.Stream()``, the side streams of CUDA
graphs and ``torch.compile``) do not wait for the default stream: with a sleep that runs on one
thread, a submission could queue its work on one, let it run while the sleep hides the host's
launches, and report an empty default stream (a 640 ns median against an honest 4.3 µs). The
sleep therefore fills every SM (``_WideSleep``: enough spinning threads to take every thread
slot of every SM), so no kernel of any stream can start before the start event. Then, when
the call returns, every pool stream that still has work queued (``cuStreamQuery``, host only:
nothing is queued on the GPU for a stream that has none) gets a join event, and the call's time
runs to the latest of the end event and those joins. Work a side stream finished before the
call returned lies inside the window anyway: it could not start before the start event, and the
end event is queued after the call returns. An honest submission that joins its streams is
timed as one stream; a single-stream one pays only the host queries, which the sleep covers.
(An earlier design fenced all 128 pool streams behind the start event on every call: 0.9 ms of
host time and about 340 µs of GPU front-end work inside the timed window per call on the H100,
which moved scores by up to 3x and broke run-to-run agreement.)

Not covered here: work on copy engines (a side-stream memcpy can run while SMs are full), and
streams a submission creates outside torch's pools as non-blocking (raw
``cudaStreamCreateWithFlags``); the harness's wall-clock check catches the latter when it is
large. Work that writes the output after the call returned (a thread, a finalizer, a kernel
launched late) fails the run instead: the child reads a sample of the output right after each
call and again when the harness asks for it (``harness/witness.py``). Where the GPU-wide
sleep cannot be built (no NVRTC), the timer falls back to torch's one-thread sleep, and the
result's ``isolation`` says that side streams are untimed.
"""

from __future__ import annotations

import collections
import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernelcup.harness import stats

_seconds = time.perf_counter  # captured at import, before any submission is

MIN_SLEEP_NS = 20_000
MAX_SLEEP_NS = 1_000_000
FLUSH_MIN_BYTES = 64 << 20
RAN_OUT_WINDOW = 20  # the baseline's no-op calls wait on the GPU where most of the last this many calls did
JOIN_WINDOW = 50  # the sleep covers the 90th percentile of the last this many calls' query costs
# torch's one-thread sleep before a calibration's events, in clock cycles: 200k cycles last
# 100 µs at the H100's 1980 MHz and longer at any lower clock.
LEAD_SLEEP_CYCLES = 200_000
SHORT_SLEEP_SHARE = 0.5
JOIN_HEADROOM = 1.25  # a sleep the joins outlasted grows to this many times the host's time to their end
POOL_PROBE_MISSES = 40  # a pool hands out its streams round-robin: this many repeats in a row means all seen


def _nothing() -> None:
    return None


@dataclass
class Reading:
    output: Any
    event_ns: float  # GPU time between the events (host time on the CPU)
    wall_ns: float  # host time from before the sleep to after the device synchronize
    host_ns: float  # host time spent inside custom_kernel
    ran_out: bool = False  # GPU: the sleep was over when the call returned (it waited on the GPU)
    # GPU: host time from before the sleep to after the synchronize that the GPU's own span over
    # the same stretch (the sleep and the call) does not explain: launch and wake-up latency, and
    # work the events missed. Independent of the sleep's length, which changes within a case.
    gap_ns: float = 0.0
    short_sleep: bool = False  # GPU: the call proved the sleep ran short of its length; it was measured again


class CpuTimer:
    """On the CPU the host clock is the only clock: all three readings are the same."""

    def __init__(self) -> None:
        self._now = time.perf_counter_ns
        self.sleep_ns = 0.0

    def synchronize(self) -> None:
        return None

    def time_call(
        self, function: Callable[[Any], Any], data: Any, before: Callable[[], None] = _nothing, baseline: bool = False
    ) -> Reading:
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
        self._set_stream: Callable[..., None] = c._cuda_setStream
        event_type: Any = c._CudaEventBase
        self._record: Callable[[Any, Any], None] = event_type.record
        self._elapsed_ms: Callable[[Any, Any], float] = event_type.elapsed_time
        self._event_done: Callable[[Any], bool] = event_type.query
        self._before = event_type(enable_timing=True)  # before the sleep: the span the wall clock is held to
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
        self.sleep_ns = float(MIN_SLEEP_NS)
        self._lead_sleep: Callable[[int], None] = c._cuda_sleep
        self._sleep: _Sleep = _WideSleep.build(device_index) or _ThreadSleep(c._cuda_sleep)
        self.side_streams_timed = isinstance(self._sleep, _WideSleep)
        self._side = SideStreams(device_index, event_type) if self.side_streams_timed else None
        self._join_ns: list[float] = []  # host time of recent calls' queries and joins (after the call)
        self._ran_out: collections.deque[bool] = collections.deque(maxlen=RAN_OUT_WINDOW)  # recent calls: sleep over?

    def _prepare(self) -> torch.Tensor:
        props = torch.cuda.get_device_properties(self._device_index)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        # Twice the L2 size, read (not written): a read leaves only clean lines behind, so the
        # timed kernel pays no write-back of the flush's own data.
        self._flush_buffer = torch.ones(
            max(2 * l2, FLUSH_MIN_BYTES) // 4, dtype=torch.float32, device=f"cuda:{self._device_index}"
        )
        self._sleep.calibrate(self._measure)
        return self._flush_buffer

    def _waiting(self, function: Callable[[Any], Any]) -> Callable[[Any], Any]:
        synchronize = self._synchronize

        def waited(data: Any) -> Any:
            synchronize()
            return function(data)

        return waited

    def _measure(self, sleep: Callable[[], object]) -> float:
        """GPU time of one sleep, in ns.

        A lead sleep (torch's, by clock cycles: at least ~100 µs at any clock) goes first, so the
        start event runs when the GPU is done with it, by which time the measured sleep is
        queued: the host's time to launch it is not in the measurement. Without it a launch
        held up on the host read as a longer sleep, every later sleep of the case ran that much
        shorter than asked, and calls outlasted it (``sleep_ran_short``)."""
        self._synchronize()
        self._set_stream(**self._stream_ids)  # the events' stream (after a call, the current one may be another)
        self._lead_sleep(LEAD_SLEEP_CYCLES)
        self._record(self._start, self._stream)
        sleep()
        self._record(self._end, self._stream)
        self._synchronize()
        return float(self._elapsed_ms(self._start, self._end) * 1e6)

    def synchronize(self) -> None:
        self._synchronize()

    def set_sleep_for(self, host_ns: list[float]) -> None:
        """Size the sleep to cover the submission's host-side launch time (its 90th percentile)
        and the queries and joins after it; what the sleep has left when the call starts hides
        at most ``MAX_SLEEP_NS`` of the call's host time."""
        if not host_ns:
            return
        if self._flush_buffer is not None:
            # Again, now that the warm-up has ramped the clocks up: the first calibration may
            # have run on an idle GPU (345 MHz on the H100 against 1980 under load).
            self._sleep.calibrate(self._measure)
        self.sleep_ns = self._sleep_covering(_p90(host_ns))

    def _grow_sleep(self, ns: float) -> None:
        """The sleep from the next call on: at least ``ns``, never shorter, at most the cap."""
        self.sleep_ns = min(MAX_SLEEP_NS, max(self.sleep_ns, ns))

    def _queries_ns(self) -> float:
        """Host time of the queries of every pool stream after a call (90th percentile of recent calls)."""
        return _p90(self._join_ns[-JOIN_WINDOW:])

    def _sleep_covering(self, host_ns: float) -> float:
        """A sleep that covers ``host_ns`` of launches and the recent calls' queries and joins."""
        joins = self._queries_ns()
        launches = min(MAX_SLEEP_NS - joins, max(MIN_SLEEP_NS, 1.5 * host_ns + MIN_SLEEP_NS))
        return float(max(launches, MIN_SLEEP_NS) + joins)

    def flush_l2(self) -> None:
        """Evict L2 by reading twice its size, then wait: the state every timed call starts in."""
        flush_buffer = self._flush_buffer if self._flush_buffer is not None else self._prepare()
        self._set_stream(**self._stream_ids)
        self._sum(flush_buffer)
        self._synchronize()

    def time_call(
        self, function: Callable[[Any], Any], data: Any, before: Callable[[], None] = _nothing, baseline: bool = False
    ) -> Reading:
        """One call between the events. ``baseline``: a no-op call of the harness's baseline,
        which waits on the GPU inside the call where most of the case's recent calls did, so
        that it pays what theirs pay after the sleep is over (the joins below) and the
        wall-clock gaps of the two stay comparable (``harness/benchmark.py``, hidden work)."""
        self.flush_l2()
        before()
        if baseline and 2 * sum(self._ran_out) > len(self._ran_out):
            function = self._waiting(function)
        slept_ns = self.sleep_ns  # the length asked of this call's sleep (a run-out doubles it below)
        t0 = self._now()
        self._record(self._before, self._stream)
        self._sleep.run(slept_ns)
        self._record(self._start, self._stream)
        t1 = self._now()
        output = function(data)
        t2 = self._now()
        ran_out = self._event_done(self._start)
        # The end goes in first, then the joins: a sleep that runs out while the host joins must
        # not time the joins. With the end recorded after them, pool queries that outlasted the
        # sleep were timed with the call (the likely cause of an honest 5.5 µs add reading
        # 19.2 µs for a whole case on an H200).
        self._record(self._end, self._stream)
        queried = not ran_out and t2 - t0 + self._queries_ns() <= slept_ns
        if self._side is None:
            busy = []
        elif queried:
            busy = self._side.join_busy()
        else:
            # The sleep is over (the call waited on the GPU, or outlasted the sleep), or what is
            # left of it would not cover the queries of every pool stream: a join on each stream
            # handed to the submission, without the queries. Queries that outlast the GPU put the
            # harness's own host time into the wall clock after the call's work, which the gap
            # counts as work left behind: GPU MODE's sort_v2 (``torch.compile``, ~650 µs of host
            # time per call, the sleep at its 1 ms cap) "continued" 64-335 µs per call on an H200
            # and read 145 µs in one job and 299 µs in the next.
            busy = self._side.join_handed_out()
        joined_at = self._now()
        outlasted = not ran_out and self._event_done(self._end)  # the GPU was done before the joins were
        self._synchronize()
        t3 = self._now()
        if queried:  # what the sleep must cover after a call's launches: the queries of every pool stream
            self._join_ns.append(float(joined_at - t2))
            if len(self._join_ns) > 4 * JOIN_WINDOW:
                del self._join_ns[:-JOIN_WINDOW]
        if not baseline:
            self._ran_out.append(ran_out)
            if ran_out and self.sleep_ns < MAX_SLEEP_NS:
                # From the next call on, a sleep that covers this one's host time, and at least
                # twice the one it outlasted: without it a launch-bound call whose host ran slower
                # than in its warm-up was timed at the host's speed for the whole job (50
                # launches: 80 µs in one job, 13 µs in the next), and a sleep sized to the host
                # time alone may still fall short where the GPU's sleep ends early (a 2.8 µs add
                # read 26 µs for a whole case on an H100).
                self._grow_sleep(max(2 * self.sleep_ns, self._sleep_covering(t2 - t1)))
        if outlasted:
            # The host's own joins outlasted the sleep and the call (pool queries slowed after the
            # sleep was sized): the wall clock waited on the host, which the gap would count as
            # work left behind (likely why an honest 2.6 µs add "continued ~3.2 µs" for a round
            # on an H200). From the next call on, a sleep that covers this call's host time from
            # its launch to the end of its joins.
            self._grow_sleep(JOIN_HEADROOM * (joined_at - t0) + MIN_SLEEP_NS)
        event_ns = self._elapsed_ms(self._start, self._end) * 1e6
        span_ns = self._elapsed_ms(self._before, self._end) * 1e6
        for joined in busy:
            event_ns = max(event_ns, self._elapsed_ms(self._start, joined) * 1e6)
            span_ns = max(span_ns, self._elapsed_ms(self._before, joined) * 1e6)
        short = ran_out and sleep_ran_short(float(t2 - t0), slept_ns)
        if short:
            # Measured again (it reuses the events, read above) for the calls after this one.
            self._sleep.calibrate(self._measure)
        return Reading(output, event_ns, float(t3 - t0), float(t2 - t1), ran_out, float(t3 - t0) - span_ns, short)

    def time_aligned(self, function: Callable[[Any], Any], data: Any, align: Callable[[], None]) -> Reading:
        """A multi-GPU rank's call (``harness/rank_child.py``): L2 flushed, then ``align`` (the
        ranks' barrier and a synchronize), then the events around the call. No launch-hiding
        sleep: the barrier is the common start, and the primitives are the ones captured before
        the submission was imported. Side streams: with no sleep, nothing the call queues can
        start before the start event; the end event is recorded as soon as the call returns,
        then every pool stream handed to the submission is joined, busy or not (no query, so
        nothing it finishes meanwhile is missed; streams outside torch's pool are not)."""
        self.flush_l2()
        align()
        t0 = self._now()
        self._record(self._start, self._stream)
        t1 = self._now()
        output = function(data)
        t2 = self._now()
        self._record(self._end, self._stream)
        busy = self._side.join_handed_out() if self._side is not None else []
        self._synchronize()
        t3 = self._now()
        event_ns = self._elapsed_ms(self._start, self._end) * 1e6
        for joined in busy:
            event_ns = max(event_ns, self._elapsed_ms(self._start, joined) * 1e6)
        return Reading(output, event_ns, float(t3 - t0), float(t2 - t1), gap_ns=float(t3 - t0) - event_ns)


def sleep_ran_short(held_ns: float, sleep_ns: float) -> bool:
    """Whether a call that outlasted its sleep shows the sleep itself ran short of its length.

    The sleep cannot start on the GPU before the host launches it, and the call outlasted it
    only if it was over when the call returned; so a sleep that was over within ``held_ns``
    (host time from before its launch to the call's return) lasted at most that. Under
    ``SHORT_SLEEP_SHARE`` of the length asked for, its calibration is wrong (a measurement
    held up, a GPU shared for a moment), and every call of the case would be timed at the
    host's pace: a 2.8 µs add read 40.8 µs for a whole case on an H100, in both rounds of a job."""
    return held_ns < SHORT_SLEEP_SHARE * sleep_ns


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))] if ordered else 0.0


class _Sleep:
    """Keeps the GPU busy for a while, queued on the current stream."""

    def calibrate(self, measure: Callable[[Callable[[], object]], float]) -> None:
        raise NotImplementedError

    def run(self, ns: float) -> None:
        raise NotImplementedError


class _ThreadSleep(_Sleep):
    """torch's own sleep: one thread spinning for a number of clock cycles. Kernels of other
    streams run beside it."""

    CALIBRATION_CYCLES = 200_000

    def __init__(self, sleep: Callable[[int], None]) -> None:
        self._sleep = sleep
        self._cycles_per_ns = 2.0

    def calibrate(self, measure: Callable[[Callable[[], object]], float]) -> None:
        rates = []
        for _ in range(3):
            elapsed_ns = measure(lambda: self._sleep(self.CALIBRATION_CYCLES))
            if elapsed_ns > 0:
                rates.append(self.CALIBRATION_CYCLES / elapsed_ns)
        if rates:
            self._cycles_per_ns = max(rates)

    def run(self, ns: float) -> None:
        self._sleep(int(ns * self._cycles_per_ns))


# Each thread of the elementwise kernel spins on the GPU's nanosecond timer once per element
# it handles; no input is read and the output is half precision, so the kernel touches little
# memory (8 bytes per thread slot of the GPU: 2.2 MB on an H100, 4% of its L2).
_SPIN_CODE = """
template <typename T> T kernelcup_spin(T x, double ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); }
  while (now - start < (unsigned long long)ns);
  return x;
}
"""


class _WideSleep(_Sleep):
    """A sleep that takes every thread slot of every SM (torch's jiterator compiles it with
    NVRTC), so that no kernel of any stream can run until it ends."""

    CALIBRATION_NS = 50_000.0

    def __init__(self, spin: Callable[..., torch.Tensor], slots: torch.Tensor) -> None:
        self._spin = spin
        self._slots = slots
        self._ns_per_unit = 1.0

    @classmethod
    def build(cls, device_index: int) -> _WideSleep | None:
        try:
            from torch.cuda import jiterator

            props = torch.cuda.get_device_properties(device_index)
            threads = int(props.multi_processor_count) * int(getattr(props, "max_threads_per_multi_processor", 2048))
            # Four elements per thread (the elementwise kernels' unrolling), one per thread slot.
            slots = torch.zeros(4 * threads, dtype=torch.float16, device=f"cuda:{device_index}")
            spin = jiterator._create_jit_fn(_SPIN_CODE, ns=0.0)
            sleep = cls(spin, slots)
            sleep.run(1000.0)
            torch.cuda.synchronize(device_index)
        except Exception:  # no NVRTC, no jiterator (ROCm builds), a driver that refuses the PTX
            return None
        return sleep

    def calibrate(self, measure: Callable[[Callable[[], object]], float]) -> None:
        """The kernel's GPU time per unit of its argument (each thread spins once per element
        it handles, and blocks may take more than one wave on a smaller GPU)."""
        elapsed = [measure(lambda: self._spin(self._slots, ns=self.CALIBRATION_NS)) for _ in range(3)]
        measured = min(elapsed)  # a hold-up only adds time: the shortest is the sleep's own
        if measured > 0 and math.isfinite(measured):
            self._ns_per_unit = measured / self.CALIBRATION_NS

    def run(self, ns: float) -> None:
        self._spin(self._slots, ns=ns / self._ns_per_unit)


class SideStreams:
    """torch's pool streams on one device; after a call, a join event on each that still has
    work queued. Queried straight through the CUDA driver (``cuStreamQuery``, through
    ``ctypes``) where it loads, else through torch's bindings.

    Querying every pool stream costs ~260 µs of host time (H100), hidden by the sleep before an
    ordinary call. A call that waited on the GPU (a sync inside it) has used the sleep up, and
    the GPU would idle through those queries inside the call's time: a call of ``.item()`` read
    280 µs in one job and 400 µs in the next. So the streams handed out since the submission was
    loaded are tracked (:class:`PoolTracker`), and such a call joins only those; so does a call
    whose host time leaves too little of the sleep to cover the queries."""

    def __init__(self, device_index: int, event_type: Any) -> None:
        pools = _pool_streams(device_index)
        self._streams = [stream for _, streams, _ in pools for stream in streams]
        self._joins = [event_type(enable_timing=True) for _ in self._streams]
        self._record: Callable[[Any, Any], None] = event_type.record
        self._query = _driver_query()
        self._handles = [ctypes.c_void_p(stream.cuda_stream) for stream in self._streams]
        listed = [(priority, [int(s.cuda_stream) for s in streams], made) for priority, streams, made in pools]
        self.tracker = PoolTracker(listed, lambda priority: int(_pool_stream(device_index, priority).cuda_stream))

    def __len__(self) -> int:
        return len(self._streams)

    def join_busy(self) -> list[Any]:
        """A join event on every stream with work still queued; the events, to read after a
        synchronize."""
        self.tracker.look()  # kept up to date on every call
        joined = []
        query = self._query
        for stream, handle, event in zip(self._streams, self._handles, self._joins, strict=True):
            busy = query(handle) == CUDA_ERROR_NOT_READY if query is not None else not stream.query()
            if busy:
                self._record(event, stream)
                joined.append(event)
        return joined

    def join_handed_out(self) -> list[Any]:
        """A join event on every stream the submission has been handed, busy or not (no query):
        for a call whose sleep is over, so that nothing it left queued can finish unseen."""
        watched = self.tracker.look()
        if watched is None:
            return self.join_busy()
        joined = []
        for index in watched:
            self._record(self._joins[index], self._streams[index])
            joined.append(self._joins[index])
        return joined


class PoolTracker:
    """Which of torch's pool streams have been handed out since tracking began.

    torch hands a pool's streams out round-robin, one counter per priority. Looking costs one
    stream per priority: where it lands in the pool's order says how many were handed out since
    the last look, and those are watched from then on. A submission that takes a whole number
    of rounds of a pool (32 streams) between two looks leaves no trace here; the work of such a
    stream is still seen by the wall clock around the call (``harness/benchmark.py``, work that
    continued after the call returned)."""

    def __init__(self, pools: list[tuple[int, list[int], int]], probe: Callable[[int], int]) -> None:
        """``pools``: (priority, the pool's stream handles in the order they are handed out,
        how many were handed out while listing them); ``probe`` hands out one stream."""
        self._probe = probe
        self._pools: list[tuple[int, dict[int, int], int]] = []  # priority, handle -> position, offset
        self._next: list[int] = []
        offset = 0
        for priority, handles, made in pools:
            self._pools.append((priority, {h: k for k, h in enumerate(handles)}, offset))
            self._next.append(made % len(handles) if handles else 0)
            offset += len(handles)
        self._watched: dict[int, None] = {}  # flat indices, in the order first seen
        self._lost = False

    def look(self) -> list[int] | None:
        """The flat indices of every stream handed out so far, or None where that is unknown."""
        for number, (priority, position, offset) in enumerate(self._pools):
            size = len(position)
            if not size:
                continue
            at = position.get(self._probe(priority))
            if at is None:  # a stream outside the listed pool: the order is not torch's any more
                self._lost = True
                continue
            for step in range((at - self._next[number]) % size):
                self._watched[offset + (self._next[number] + step) % size] = None
            self._next[number] = (at + 1) % size
        return None if self._lost else list(self._watched)


CUDA_ERROR_NOT_READY = 600


def _driver_query() -> Callable[[ctypes.c_void_p], int] | None:
    try:
        query = ctypes.CDLL("libcuda.so.1").cuStreamQuery
    except (OSError, AttributeError):
        return None
    query.argtypes, query.restype = [ctypes.c_void_p], ctypes.c_int
    result: Callable[[ctypes.c_void_p], int] = query
    return result


def _pool_stream(device_index: int, priority: int) -> torch.cuda.Stream:
    """The next stream torch's pool of ``priority`` hands out (round-robin)."""
    stream: torch.cuda.Stream = torch.cuda.Stream(device=device_index, priority=priority)  # type: ignore[no-untyped-call]
    return stream


def _pool_streams(device_index: int) -> list[tuple[int, list[torch.cuda.Stream], int]]:
    """Every stream of torch's pools on this device (each priority's pool, round-robin): per
    priority, its streams in the order handed out, and how many were handed out to list them.

    Asked for before the submission is imported; a stream handle never changes afterwards."""
    low, high = torch.cuda.Stream(device=device_index).priority_range()  # type: ignore[no-untyped-call]
    pools = []
    seen: set[int] = set()
    for priority in range(int(low), int(high) - 1, -1):
        found: dict[int, torch.cuda.Stream] = {}
        misses = made = 0
        while misses < POOL_PROBE_MISSES:
            stream = _pool_stream(device_index, priority)
            made += 1
            if stream.cuda_stream in found or stream.cuda_stream in seen:
                misses += 1
            else:
                found[stream.cuda_stream] = stream
                misses = 0
        seen.update(found)
        pools.append((priority, list(found.values()), made))
    return pools


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


def noop_event_ns(timer: Timer, calls: int = 41) -> float:
    """The median event time of calls that launch nothing: what the timing itself costs.

    Measured when the child starts, before any submission code is loaded, so the submission
    cannot inflate it; the harness caps the overhead it subtracts from every timed call near
    this figure (``harness/benchmark.py``). A submission that made the no-op calls of its job
    slower (GPU work slipped into their window from a thread) would otherwise have up to half
    of each of its calls subtracted."""
    readings = sorted(timer.time_call(_ignore, None).event_ns for _ in range(calls))
    return float(stats.median(readings))


def _ignore(data: Any) -> None:
    return None


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
    batch at a time, as it does for timed calls, instead of piling up on one buffer. Calls so
    long that two of them outlast ``max_seconds`` (a batched eigensolver: a second each) are
    warm after those two: the GPU's clock ramps in milliseconds, and eight such calls per case
    and round took a third of a ranked run's limit.
    """
    now = _seconds
    start = now()
    host: list[float] = []
    events: list[float] = []
    data = make_data()
    for _ in range(3):
        reading = timer.time_call(function, data)
        host.append(reading.host_ns)
        events.append(reading.event_ns)
        del reading
        if len(host) >= 2 and now() - start >= max_seconds:
            break
    timer.set_sleep_for(host)
    calls = len(host)
    batch_medians: list[float] = [stats.median(sorted(events))]
    steady = False
    while now() - start < max_seconds:
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
        if len(batch_medians) >= 4:  # three batches of five, not the first calls
            last = batch_medians[-3:]
            steady = max(last) - min(last) <= 0.02 * max(min(last), 1.0)
        elapsed = now() - start
        if (steady and elapsed >= min_seconds) or elapsed >= max_seconds:
            break
    timer.set_sleep_for(host[-20:])
    return Warmup(calls, now() - start, steady, timer.sleep_ns, batch_medians[-1])
