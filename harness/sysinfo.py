"""What machine a result was measured on: versions, GPU, driver and SM clock (NVML via ctypes),
and what the GPU's clock did while benchmarks ran."""

from __future__ import annotations

import ctypes
import importlib.metadata
import platform
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kernelcup.harness.spec import SystemInfo

NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0
# nvmlClocksEventReasons bits that mean the clock was held down (idle, application clocks and
# display settings are left out: they say nothing about a kernel's speed).
CLOCK_LIMITS = {
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x20: "thermal (software)",
    0x40: "thermal (hardware)",
    0x80: "power brake",
}
WATCH_INTERVAL_S = 0.2


class Nvml:
    """The few NVML calls the harness needs; every method returns None where NVML is absent."""

    def __init__(self) -> None:
        self._lib: Any = None
        self._handle = ctypes.c_void_p()
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() == 0:
                self._lib = lib
        except OSError:
            pass

    def select(self, uuid: str = "", index: int = 0) -> bool:
        if self._lib is None:
            return False
        if uuid:
            name = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
            if self._lib.nvmlDeviceGetHandleByUUID(name.encode(), ctypes.byref(self._handle)) == 0:
                return True
        status: int = self._lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self._handle))
        return status == 0

    def _uint(self, function: str, *args: int) -> float | None:
        """One unsigned reading of the selected GPU (``nvmlDevice<function>``), or None."""
        if self._lib is None or not self._handle.value:
            return None
        value = ctypes.c_uint()
        if getattr(self._lib, f"nvmlDevice{function}")(self._handle, *args, ctypes.byref(value)) != 0:
            return None
        return float(value.value)

    def sm_clock_mhz(self) -> float | None:
        return self._uint("GetClockInfo", NVML_CLOCK_SM)

    def memory_clock_mhz(self) -> float | None:
        return self._uint("GetClockInfo", NVML_CLOCK_MEM)

    def power_w(self) -> float | None:
        milliwatts = self._uint("GetPowerUsage")
        return None if milliwatts is None else milliwatts / 1000.0

    def temperature_c(self) -> float | None:
        return self._uint("GetTemperature", NVML_TEMPERATURE_GPU)

    def clock_limits(self) -> int:
        """The clock event (throttle) reason bits now; 0 where NVML cannot say."""
        if self._lib is None or not self._handle.value:
            return 0
        value = ctypes.c_ulonglong()
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            function = getattr(self._lib, name, None)
            if function is not None and function(self._handle, ctypes.byref(value)) == 0:
                return int(value.value)
        return 0

    def driver(self) -> str:
        if self._lib is None:
            return ""
        buffer = ctypes.create_string_buffer(96)
        if self._lib.nvmlSystemGetDriverVersion(buffer, 96) != 0:
            return ""
        return buffer.value.decode(errors="replace")


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return ""


def _driver_from_proc() -> str:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return ""
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return ""


def visible_nvml() -> Nvml:
    """NVML selected on the GPU this process's torch runs on (:func:`visible_gpu_uuid`)."""
    nvml = Nvml()
    nvml.select(visible_gpu_uuid())
    return nvml


def visible_gpu_uuid() -> str:
    """The UUID of the GPU this process's torch runs on (its ``cuda:0``), for ``Nvml.select``:
    NVML numbers every GPU of the machine whatever ``CUDA_VISIBLE_DEVICES`` says, so index 0
    would read GPU 0's clock for a CUDA program timed on GPU 1 (JOURNAL.md, The GPU a job's
    clocks are read from)."""
    import torch

    return str(getattr(torch.cuda.get_device_properties(0), "uuid", ""))


def collect(device: str, child_info: dict[str, Any], nvml: Nvml | None) -> SystemInfo:
    import torch

    info = SystemInfo(
        device=device,
        gpu=str(child_info.get("gpu", "cpu" if device == "cpu" else "")) or platform.processor() or "cpu",
        torch=torch.__version__,
        cuda=torch.version.cuda or "",
        triton=str(child_info.get("triton", "")) or _version("triton"),
        python=platform.python_version(),
        hostname=socket.gethostname(),
    )
    if device == "cpu":
        info.gpu = "cpu"
    else:
        info.driver = (nvml.driver() if nvml else "") or _driver_from_proc()
    return info


@contextmanager
def watching(nvml: Nvml | None, info: SystemInfo) -> Iterator[None]:
    """Sample the SM and memory clocks, the temperature, the power drawn and the clock limits
    while the block runs, and record their range in ``info``: a score measured while the GPU was
    power- or heat-limited says so. The memory clock and the power are there to tell apart what
    moves a memory-bound case between jobs while the SM clock stays put (JOURNAL.md, The memory
    clock and the power in the result)."""
    if nvml is None or nvml.sm_clock_mhz() is None:
        yield
        return
    clocks: list[float] = []
    memory_clocks: list[float] = []
    temperatures: list[float] = []
    powers: list[float] = []
    limits = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal limits
        while True:
            for reading, kept in (
                (nvml.sm_clock_mhz(), clocks),
                (nvml.memory_clock_mhz(), memory_clocks),
                (nvml.temperature_c(), temperatures),
                (nvml.power_w(), powers),
            ):
                if reading is not None:
                    kept.append(reading)
            limits |= nvml.clock_limits()
            if stop.wait(WATCH_INTERVAL_S):
                return

    thread = threading.Thread(target=sample, name="kernelcup-clock-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
        if clocks:
            info.sm_clock_mhz_min, info.sm_clock_mhz_max = min(clocks), max(clocks)
        if memory_clocks:
            info.memory_clock_mhz_min, info.memory_clock_mhz_max = min(memory_clocks), max(memory_clocks)
        if temperatures:
            info.gpu_temp_c_max = max(temperatures)
        if powers:
            info.power_w_max = max(powers)
        info.clock_limits = [name for bit, name in CLOCK_LIMITS.items() if limits & bit]
