"""The GPU's own record of a timed call, in the submission's process.

CUPTI, NVIDIA's profiling interface, records every kernel, memcpy and memset the process causes,
on every stream and from every thread, with the GPU's own start and end, and ties each one
(by its correlation id) to the runtime or driver call that launched it and that call's thread.
Correlation ids count up across the whole process as calls are made, so they order launches
without any clock the submission could reach. A timed call is then::

    marker       the harness's own small kernel, launched right before custom_kernel
    closing      the harness's device synchronize right after it returns (the main thread's last)
    its work     every activity launched between the two, from any thread
    its time     from the first one's start to the last one's end
    outside work activities another thread launched during the order but outside the call:
                 charged to the call, and reported

The main thread's launches before the marker are the harness's own (the inputs, the L2 flush,
a multi-GPU barrier) and are never counted. The record comes from CUPTI itself
(``harness/cupti.py``), or from torch's profiler where that does not load; the rules are in
``harness/NOTES.md`` (Timing: the GPU's record), what each source costs in ``harness/JOURNAL.md``.

A record without the marker or the closing synchronize, a record switched off by the time the
call returned, or a kernel or graph launched inside the call with no record of its run (the
record paused while it ran) is incomplete: the run fails rather than time what it cannot see.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Runtime and driver calls after which the host has waited for the GPU: a call that makes one
# runs at the host's pace after the wait (``waited``).
SYNC_CALLS = ("Synchronize", "cudaMemcpy\x00", "cuMemcpyDtoH\x00", "cuMemcpyHtoD\x00", "cuMemcpy\x00")
MARKER = "spin_kernel"  # torch's sleep kernel (``torch.cuda._sleep``): the harness's marker
CLOSING = "cudaDeviceSynchronize"


@dataclass(frozen=True)
class Activity:
    """One kernel, memcpy or memset as the GPU recorded it (ns)."""

    start_ns: int
    end_ns: int
    stream: int
    correlation: int  # of the call that launched it; 0 where the record holds no such call
    thread: int  # the launching thread as the record names it; 0 where unknown
    name: str


@dataclass(frozen=True)
class Launch:
    """A runtime or driver call on the host, as the record has it."""

    correlation: int
    thread: int
    name: str


@dataclass(frozen=True)
class CallRecord:
    """What the record says of one timed call."""

    time_ns: float  # first activity's start to the last one's end (0: the call caused none)
    busy_ns: float  # the GPU busy with the call's activities, overlaps counted once
    activities: int
    streams: int
    outside_ns: float  # GPU time of other threads' activities launched outside the call
    waited: bool  # the call made a runtime call that waits for the GPU
    complete: bool  # the marker and the closing synchronize are in the record, the profiler still on

    @property
    def idle_share(self) -> float:
        """Share of the call's span the GPU spent waiting on the host (launches, syncs)."""
        return 0.0 if self.time_ns <= 0 else max(0.0, 1.0 - self.busy_ns / self.time_ns)


INCOMPLETE = CallRecord(0.0, 0.0, 0, 0, 0.0, False, False)


def main_thread_id() -> int:
    """The calling thread as CUPTI names it (the low 32 bits of ``pthread_self``)."""
    libc = ctypes.CDLL(None)
    libc.pthread_self.restype = ctypes.c_ulong
    return int(libc.pthread_self()) & 0xFFFFFFFF


class TorchRecord:
    """The record through torch's profiler (Kineto): switched on and off around one order."""

    source = "torch-profiler"

    def __init__(self) -> None:
        from torch._C._autograd import (
            DeviceType,
            _disable_profiler,
            _enable_profiler,
            _prepare_profiler,
            _profiler_enabled,
        )
        from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

        self._config = ProfilerConfig(ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig())
        self._activities = {ProfilerActivity.CUDA}
        self._prepare: Callable[..., None] = _prepare_profiler
        self._enable: Callable[..., None] = _enable_profiler
        self._disable: Callable[[], Any] = _disable_profiler
        self._enabled: Callable[[], bool] = _profiler_enabled
        self._gpu = DeviceType.CUDA
        self.main_thread = main_thread_id()
        self.on = False

    def start(self) -> None:
        if self.on:
            return
        self._prepare(self._config, self._activities)
        self._enable(self._config, self._activities)
        self.on = True

    def pause(self) -> None:
        """Switched off already between orders."""

    def stop(self) -> tuple[list[Activity], list[Launch], bool]:
        """The record since :meth:`start`; the flag says whether the profiler was still on."""
        self.on = False
        still_on = bool(self._enabled())
        try:
            events = self._disable().events()
        except RuntimeError:  # switched off (or restarted) by someone else
            return [], [], False
        return *read(events, self._gpu), still_on


class CuptiRecord:
    """The record through CUPTI itself (``harness/cupti.py``): only the GPU's activities and
    the runtime and driver calls, enabled from the first order on, paused for the warm-up."""

    source = "cupti"

    def __init__(self) -> None:
        from kernelcup.harness import cupti

        self._cupti = cupti.Cupti()
        self.main_thread = main_thread_id()
        self.on = False

    def start(self) -> None:
        if self.on:
            return
        if not self._cupti.enabled:
            self._cupti.enable()
        self._cupti.take()  # what came before this order
        self.on = True

    def stop(self) -> tuple[list[Activity], list[Launch], bool]:
        """The record since :meth:`start`; the flag says whether CUPTI kept every record. The
        record stays enabled for the next order (:meth:`pause` disables it)."""
        self.on = False
        gpu, calls = self._cupti.take()
        complete = self._cupti.dropped() == 0 and not self._cupti.misread
        launches: dict[int, Launch] = {}
        for call in calls:
            launches.setdefault(call.correlation, Launch(call.correlation, call.thread, call.name))
        activities = []
        for work in gpu:
            found = launches.get(work.correlation)
            activities.append(
                Activity(
                    work.start_ns,
                    work.end_ns,
                    work.stream,
                    found.correlation if found else 0,
                    found.thread if found else 0,
                    work.name,
                )
            )
        return activities, sorted(launches.values(), key=lambda launch: launch.correlation), complete


    def pause(self) -> None:
        """Disable the record where no order needs it (the warm-up's untimed calls)."""
        if self._cupti.enabled and not self.on:
            self._cupti.disable()
            self._cupti.take()


GpuRecord = TorchRecord | CuptiRecord
# ``KERNELCUP_HARNESS_RECORD``: ``cupti`` (the default) or ``torch-profiler``.
RECORD_ENV = "KERNELCUP_HARNESS_RECORD"


def open_record() -> GpuRecord:
    """CUPTI itself where it loads, else torch's profiler (which drives the same CUPTI)."""
    import os

    from kernelcup.harness import cupti

    if os.environ.get(RECORD_ENV, "cupti") != TorchRecord.source:
        try:
            return CuptiRecord()
        except cupti.CuptiUnavailable:
            pass
    return TorchRecord()


def read(events: list[Any], gpu: Any) -> tuple[list[Activity], list[Launch]]:
    """The GPU's activities (each tied to its launch) and the host's launches in ``events``."""
    launches: dict[int, Launch] = {}
    on_gpu: list[Any] = []
    for event in events:
        if event.device_type() == gpu:
            on_gpu.append(event)
            continue
        correlation = event.correlation_id()
        if correlation > 0:
            launches.setdefault(correlation, Launch(correlation, event.device_resource_id() & 0xFFFFFFFF, event.name()))
    activities = []
    for event in on_gpu:
        found = launches.get(event.correlation_id())
        start = event.start_ns()
        activities.append(
            Activity(
                start,
                start + event.duration_ns(),
                event.device_resource_id(),
                found.correlation if found else 0,
                found.thread if found else 0,
                event.name(),
            )
        )
    return activities, sorted(launches.values(), key=lambda launch: launch.correlation)


def judge(activities: list[Activity], launches: list[Launch], main_thread: int, still_on: bool) -> CallRecord:
    """The call between the harness's marker and its closing synchronize, from one order's record.

    An activity is the call's where its launch lies between the two, from any thread; one with
    no recorded launch (a launch path the record does not tie) is the call's where it started
    on the GPU after the marker did, else outside work. Another thread's launches outside the
    call are outside work."""
    markers = [a for a in activities if a.thread == main_thread and MARKER in a.name and a.correlation]
    closings = [c.correlation for c in launches if c.thread == main_thread and c.name == CLOSING]
    if not still_on or not markers or not closings:
        return INCOMPLETE
    marker = min(markers, key=lambda a: a.correlation)
    opened, closed = marker.correlation, max(closings)
    if closed < opened:
        return INCOMPLETE
    recorded = {a.correlation for a in activities}
    if any(opened < c.correlation < closed and _launches(c.name) and c.correlation not in recorded for c in launches):
        return INCOMPLETE  # a kernel or graph launched inside the call left no record of its run
    mine: list[Activity] = []
    outside: list[Activity] = []
    for activity in activities:
        if activity is marker:
            continue
        if activity.correlation:
            if opened < activity.correlation < closed:
                mine.append(activity)
            elif activity.thread != main_thread:
                outside.append(activity)
        elif activity.start_ns >= marker.start_ns:
            mine.append(activity)
        else:
            outside.append(activity)
    waited = any(opened < c.correlation < closed and _waits(c.name) for c in launches)
    if not mine:
        return CallRecord(0.0, 0.0, 0, 0, _busy(outside), waited, True)
    first = min(a.start_ns for a in mine)
    last = max(a.end_ns for a in mine)
    return CallRecord(
        float(last - first), _busy(mine), len(mine), len({a.stream for a in mine}), _busy(outside), waited, True
    )


def _launches(name: str) -> bool:
    """A runtime or driver call that puts a kernel or a graph on the GPU."""
    return "Launch" in name and ("Kernel" in name or "Graph" in name)


def _waits(name: str) -> bool:
    terminated = name + "\x00"
    return any(marker in terminated for marker in SYNC_CALLS)


def _busy(activities: list[Activity]) -> float:
    """GPU time covered by ``activities``, overlaps counted once."""
    total = 0
    end = None
    for activity in sorted(activities, key=lambda a: a.start_ns):
        if end is None or activity.start_ns > end:
            total += activity.end_ns - activity.start_ns
            end = activity.end_ns
        elif activity.end_ns > end:
            total += activity.end_ns - end
            end = activity.end_ns
    return float(total)
