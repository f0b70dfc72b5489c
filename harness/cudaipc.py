"""A GPU buffer the harness owns and lends to the submission's process through CUDA IPC.

Uses the driver API (``libcuda.so.1``, always loaded with torch) through ctypes rather than
torch's private sharing helpers: those also share a reference-count file in /dev/shm that a
child running under another uid cannot open. The buffer is allocated with ``cuMemAlloc``
outside torch's caching allocator, so its handle covers exactly this buffer and nothing else
of the harness's memory.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

HANDLE_SIZE = 64
IPC_LAZY_ENABLE_PEER_ACCESS = 1


class CudaIpcError(Exception):
    pass


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_SIZE)]


class _Driver:
    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise CudaIpcError(f"libcuda.so.1 not found: {exc}") from exc

    def call(self, name: str, *args: Any) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            raise CudaIpcError(f"{name} failed with CUDA error {status}")

    def ensure_context(self) -> None:
        """Make torch's primary context current on this thread."""
        torch.cuda.init()  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()
        ctx = ctypes.c_void_p()
        self.call("cuCtxGetCurrent", ctypes.byref(ctx))
        if not ctx.value:
            raise CudaIpcError("no current CUDA context")


def _wrap(pointer: int, nbytes: int) -> torch.Tensor:
    """A uint8 torch tensor over raw device memory (no copy)."""

    class _Array:
        __cuda_array_interface__ = {  # noqa: RUF012
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 2,
        }

    return torch.as_tensor(_Array(), device="cuda")


class SharedBuffer:
    """Harness side: device memory plus the IPC handle that lends it out."""

    def __init__(self, nbytes: int) -> None:
        self._driver = _Driver()
        self._driver.ensure_context()
        pointer = ctypes.c_uint64()
        self._driver.call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(nbytes))
        self._pointer = pointer.value
        self.nbytes = nbytes
        handle = _Handle()
        try:
            self._driver.call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(self._pointer))
        except CudaIpcError:
            self.close()
            raise
        self.handle_hex = bytes(handle.reserved).hex()
        self.tensor: torch.Tensor | None = _wrap(self._pointer, nbytes)

    def close(self) -> None:
        if self._pointer:
            self.tensor = None
            torch.cuda.synchronize()
            self._driver.call("cuMemFree_v2", ctypes.c_uint64(self._pointer))
            self._pointer = 0


class BorrowedBuffer:
    """Child side: the harness's buffer opened from its handle."""

    def __init__(self, handle_hex: str, nbytes: int) -> None:
        raw = bytes.fromhex(handle_hex)
        if len(raw) != HANDLE_SIZE:
            raise CudaIpcError("bad IPC handle")
        self._driver = _Driver()
        self._driver.ensure_context()
        handle = _Handle()
        ctypes.memmove(handle.reserved, raw, HANDLE_SIZE)
        pointer = ctypes.c_uint64()
        self._driver.call(
            "cuIpcOpenMemHandle_v2",
            ctypes.byref(pointer),
            handle,
            ctypes.c_uint(IPC_LAZY_ENABLE_PEER_ACCESS),
        )
        self._pointer = pointer.value
        self.nbytes = nbytes
        self.tensor: torch.Tensor | None = _wrap(self._pointer, nbytes)

    def close(self) -> None:
        if self._pointer:
            self.tensor = None
            self._driver.call("cuIpcCloseMemHandle", ctypes.c_uint64(self._pointer))
            self._pointer = 0
