"""What machine a result was measured on: versions, GPU, driver and SM clock (NVML via ctypes)."""

from __future__ import annotations

import ctypes
import importlib.metadata
import platform
import socket
from pathlib import Path
from typing import Any

from harness.spec import SystemInfo

NVML_CLOCK_SM = 1


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

    def sm_clock_mhz(self) -> float | None:
        if self._lib is None or not self._handle.value:
            return None
        value = ctypes.c_uint()
        if self._lib.nvmlDeviceGetClockInfo(self._handle, NVML_CLOCK_SM, ctypes.byref(value)) != 0:
            return None
        return float(value.value)

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
