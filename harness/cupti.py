"""CUPTI's activity records through ctypes: the GPU's own record of the process, at its lowest cost.

CUPTI (NVIDIA's profiling interface, ``libcupti``, which every CUDA build of torch ships and
loads for its profiler) writes one record per kernel, memcpy and memset the process causes, on
every stream, with the GPU's start and end and the correlation id of the call that launched it;
and one record per runtime or driver call, with that id and the calling thread. This module asks
for exactly those records and nothing else (torch's profiler also runs its own callbacks on every
torch operation: the cost per launch and per order in ``harness/JOURNAL.md``, CUPTI itself, rounds
started ahead, shorter ranked rounds). Records arrive in buffers
this module hands CUPTI; :meth:`Cupti.take` flushes them and returns what arrived.

The layouts read are CUPTI 13's (``cupti_activity.h``: ``CUpti_ActivityKernel13``,
``CUpti_ActivityMemcpy7``, ``CUpti_ActivityMemcpyPtoP4``, ``CUpti_ActivityMemset5``,
``CUpti_ActivityAPI``). The fields read sit at the same offsets in every record version since
CUDA 11; the GPU check (``bench/gpu/cupti_probe.py``) holds them against torch's profiler.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import struct
import threading
from dataclasses import dataclass

# CUpti_ActivityKind
KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_DRIVER = 4
KIND_RUNTIME = 5
KIND_CONCURRENT_KERNEL = 10
KIND_MEMCPY2 = 22  # peer to peer
GPU_KINDS = (KIND_CONCURRENT_KERNEL, KIND_MEMCPY, KIND_MEMSET, KIND_MEMCPY2)
API_KINDS = (KIND_RUNTIME, KIND_DRIVER)
_DOMAIN = {KIND_DRIVER: 1, KIND_RUNTIME: 2}  # CUpti_CallbackDomain

SUCCESS = 0
MAX_LIMIT_REACHED = 12  # no more records in the buffer
FLUSH_FORCED = 1
BUFFER_BYTES = 4 << 20

# (start, end, stream, correlation) offsets per kind, and where a kernel's name pointer lies.
_FIELDS = {
    KIND_CONCURRENT_KERNEL: struct.Struct("<QQ16xI40xI"),  # start 16, end 24, stream 48, correlation 92
    KIND_MEMCPY: struct.Struct("<QQ8xII"),  # start 16, end 24, stream 40, correlation 44
    KIND_MEMSET: struct.Struct("<QQ8xII"),
    KIND_MEMCPY2: struct.Struct("<QQ8xI16xI"),  # start 16, end 24, stream 40, correlation 60
}
_GPU_FIELDS_AT = 16
_KERNEL_NAME_AT = 104
_MEMCPY_NAMES = {1: "Memcpy HtoD", 2: "Memcpy DtoH", 8: "Memcpy DtoD", 10: "Memcpy PtoP"}
_API = struct.Struct("<IQQIII")  # cbid 4, start 8, end 16, process 24, thread 28, correlation 32
_VERSION_SUFFIX = re.compile(r"(_v\d+)?(_ptsz|_ptds)?$")


class CuptiUnavailable(RuntimeError):
    """No usable CUPTI in this process."""


@dataclass(frozen=True)
class GpuActivity:
    start_ns: int
    end_ns: int
    stream: int
    correlation: int
    name: str


@dataclass(frozen=True)
class ApiCall:
    correlation: int
    thread: int
    name: str


_BufferRequested = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
_BufferCompleted = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t
)


def find_library() -> str:
    """The libcupti this process already loaded (torch's), else the one beside torch's CUDA
    libraries, else the system's. ``KERNELCUP_HARNESS_CUPTI_LIB`` names one outright."""
    named = os.environ.get("KERNELCUP_HARNESS_CUPTI_LIB", "")
    if named:
        return named
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                path = line.rsplit(" ", 1)[-1].strip()
                if "/libcupti.so" in path:
                    return path
    except OSError:
        pass
    for folder in _nvidia_lib_folders():
        for name in sorted(os.listdir(folder), reverse=True):
            if name.startswith("libcupti.so"):
                return os.path.join(folder, name)
    found = ctypes.util.find_library("cupti")
    if found:
        return found
    raise CuptiUnavailable("no libcupti found (torch's CUDA wheels ship one; KERNELCUP_HARNESS_CUPTI_LIB names one)")


def _nvidia_lib_folders() -> list[str]:
    try:
        import nvidia  # type: ignore[import-not-found]  # torch's CUDA wheels
    except ImportError:
        return []
    folders = []
    for root in getattr(nvidia, "__path__", []):
        for sub in sorted(os.listdir(root)):
            for lib in (os.path.join(root, sub, "lib"), os.path.join(root, sub, "lib64")):
                if os.path.isdir(lib):
                    folders.append(lib)
    return folders


class Cupti:
    """One process's subscription to CUPTI's activity records (at most one per process: CUPTI
    holds one pair of buffer callbacks)."""

    def __init__(self, library: str | None = None, api_records: bool = True) -> None:
        try:
            self._lib = ctypes.CDLL(library or find_library())
        except OSError as error:
            raise CuptiUnavailable(f"libcupti did not load: {error}") from error
        lib = self._lib
        lib.cuptiActivityGetNextRecord.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
        lib.cuptiGetCallbackName.argtypes = [ctypes.c_int, ctypes.c_uint32, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuptiGetResultString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        lib.cuptiActivityGetNumDroppedRecords.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.POINTER(ctypes.c_size_t),
        ]
        self._lock = threading.Lock()
        self._free: list[ctypes.Array[ctypes.c_char]] = []
        self._lent: dict[int, ctypes.Array[ctypes.c_char]] = {}
        self._activities: list[GpuActivity] = []
        self._calls: list[ApiCall] = []
        self._names: dict[tuple[int, int], str] = {}
        # The callbacks must live as long as CUPTI may call them: the life of the process.
        self._requested = _BufferRequested(self._on_requested)
        self._completed = _BufferCompleted(self._on_completed)
        self._check(lib.cuptiActivityRegisterCallbacks(self._requested, self._completed), "register callbacks")
        self.kinds = GPU_KINDS + (API_KINDS if api_records else ())
        self.enabled = False
        self.misread = 0  # buffers whose records could not be read (a record then lacks them)

    def _check(self, result: int, what: str) -> None:
        if result != SUCCESS:
            text = ctypes.c_char_p()
            self._lib.cuptiGetResultString(result, ctypes.byref(text))
            raise CuptiUnavailable(f"CUPTI {what}: {(text.value or b'').decode(errors='replace')} ({result})")

    def enable(self) -> None:
        for kind in self.kinds:
            self._check(self._lib.cuptiActivityEnable(kind), f"enable activity kind {kind}")
        self.enabled = True

    def disable(self) -> None:
        for kind in self.kinds:
            self._lib.cuptiActivityDisable(kind)
        self.enabled = False

    def take(self) -> tuple[list[GpuActivity], list[ApiCall]]:
        """Every record since the last take. The GPU's records of work still running may come
        later: synchronize first."""
        self._check(self._lib.cuptiActivityFlushAll(FLUSH_FORCED), "flush")
        with self._lock:
            activities, self._activities = self._activities, []
            calls, self._calls = self._calls, []
        return activities, calls

    def dropped(self) -> int:
        """Records CUPTI dropped for want of buffer space since the last ask (0 is the only good answer)."""
        count = ctypes.c_size_t(0)
        self._lib.cuptiActivityGetNumDroppedRecords(None, 0, ctypes.byref(count))
        return int(count.value)

    # CUPTI's callbacks: they may run on CUPTI's own thread; they never raise.

    def _on_requested(self, buffer: ctypes._Pointer, size: ctypes._Pointer, most: ctypes._Pointer) -> None:  # type: ignore[type-arg]
        with self._lock:
            block = self._free.pop() if self._free else ctypes.create_string_buffer(BUFFER_BYTES)
            address = ctypes.addressof(block)
            self._lent[address] = block
        buffer[0] = address
        size[0] = BUFFER_BYTES
        most[0] = 0

    def _on_completed(self, context: int, stream: int, buffer: int, size: int, valid: int) -> None:
        try:
            if buffer and valid:
                self._read(buffer, valid)
        except Exception:  # a misread must not end the process from CUPTI's thread: counted instead
            self.misread += 1
        finally:
            with self._lock:
                block = self._lent.pop(buffer or 0, None)
                if block is not None:
                    self._free.append(block)

    def _read(self, buffer: int, valid: int) -> None:
        data = ctypes.string_at(buffer, valid)
        record = ctypes.c_void_p(None)
        next_record = self._lib.cuptiActivityGetNextRecord
        activities: list[GpuActivity] = []
        calls: list[ApiCall] = []
        while next_record(buffer, valid, ctypes.byref(record)) == SUCCESS:
            at = (record.value or 0) - buffer
            kind = int.from_bytes(data[at : at + 4], "little")
            fields = _FIELDS.get(kind)
            if fields is not None:
                start, end, stream_id, correlation = fields.unpack_from(data, at + _GPU_FIELDS_AT)
                activities.append(GpuActivity(start, end, stream_id, correlation, self._gpu_name(kind, data, at)))
            elif kind in _DOMAIN:
                cbid, _, _, _, thread, correlation = _API.unpack_from(data, at + 4)
                calls.append(ApiCall(correlation, thread, self._api_name(kind, cbid)))
        with self._lock:
            self._activities.extend(activities)
            self._calls.extend(calls)

    def _gpu_name(self, kind: int, data: bytes, at: int) -> str:
        if kind == KIND_CONCURRENT_KERNEL:
            (pointer,) = struct.unpack_from("<Q", data, at + _KERNEL_NAME_AT)
            return ctypes.string_at(pointer).decode(errors="replace") if pointer else "kernel"
        if kind == KIND_MEMSET:
            return "Memset"
        return _MEMCPY_NAMES.get(data[at + 4], "Memcpy")

    def _api_name(self, kind: int, cbid: int) -> str:
        key = (kind, cbid)
        name = self._names.get(key)
        if name is None:
            text = ctypes.c_char_p()
            if self._lib.cuptiGetCallbackName(_DOMAIN[kind], cbid, ctypes.byref(text)) == SUCCESS and text.value:
                name = _VERSION_SUFFIX.sub("", text.value.decode(errors="replace"))
            else:
                name = f"cbid{cbid}"
            self._names[key] = name
        return name
