"""A call's output as it was when its timing ended, to catch work that went on after it.

A submission can hand its work to a thread (or leave a kernel to be launched from one) and
return before the work is done: the timed call then reads a few microseconds, and the output
is complete by the time the harness asks for it, a socket round trip later. Right after each
timed call (the device synchronized, so every kernel the call queued has finished) the child
reads a few elements of the output at positions drawn there and then from the operating
system's randomness, on a stream of its own that waits for no other. When the harness later
asks for that call's output, the same elements are read again: if any changed, the output
was still being written after the call returned, and the run fails.

An honest submission's output cannot change in between: no call runs, and whatever the call
left on a side stream was waited for before the reading. The same reading is taken of the
inputs of a no-op call, so real and no-op calls cost the child the same, which the harness's
clock cross-checks rely on (``harness/benchmark.py``). Imported before the submission, so the
randomness and the stream are the harness's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass
from typing import Any

import torch

SAMPLES = 64
MAX_DEPTH = 8
_random_bytes = os.urandom  # captured before the submission is imported

_SAME_SIZE_INTEGER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass
class Witness:
    tensor: int  # which of the output's tensors, in transfer.flatten's order
    positions: tuple[torch.Tensor, ...]  # one index tensor per dimension, on the CPU
    values: bytes


class Witnesses:
    """Readings of outputs for one child: a generator and, on a GPU, a stream of their own."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.generator = torch.Generator()
        self.stream = _own_stream(device) if device.type == "cuda" else None

    def take(self, value: Any) -> Witness | None:
        """Read ``SAMPLES`` elements of one of ``value``'s tensors, chosen now; None where
        ``value`` holds no element, or where it cannot be read (shipping it says why)."""
        try:
            return self._take(value)
        except Exception:
            return None

    def _take(self, value: Any) -> Witness | None:
        tensors = _tensors(value)
        candidates = [index for index, tensor in enumerate(tensors) if tensor.numel() > 0]
        if not candidates:
            return None
        self.generator.manual_seed(int.from_bytes(_random_bytes(8), "little") >> 1)
        chosen = candidates[0]
        if len(candidates) > 1:
            chosen = candidates[int(torch.randint(len(candidates), (1,), generator=self.generator))]
        tensor = tensors[chosen]
        if tensor.is_contiguous():  # one index into the flat tensor
            positions: tuple[torch.Tensor, ...] = (torch.randint(tensor.numel(), (SAMPLES,), generator=self.generator),)
        else:
            positions = tuple(torch.randint(size, (SAMPLES,), generator=self.generator) for size in tensor.shape)
        return Witness(chosen, positions, self._read(tensor, positions))

    def changed(self, witness: Witness | None, value: Any) -> bool:
        """Whether ``value`` (the same output, now) differs where ``witness`` read it."""
        if witness is None:
            return False
        tensors = _tensors(value)
        if witness.tensor >= len(tensors):
            return True
        try:
            return self._read(tensors[witness.tensor], witness.positions) != witness.values
        except Exception:
            return False  # the same read worked right after the call: shipping it says what broke

    def _read(self, tensor: torch.Tensor, positions: tuple[torch.Tensor, ...]) -> bytes:
        integers = _SAME_SIZE_INTEGER.get(tensor.element_size())
        if integers is not None and not tensor.is_complex():
            # Bytes, not values: NaN equals itself, and fp8/fp4 dtypes have no indexing kernels.
            tensor = tensor.view(integers)
        if len(positions) == 1 and tensor.dim() != 1:
            tensor = tensor.reshape(-1)  # contiguous when read: a view
        if tensor.device.type == "cpu":
            picked = tensor[positions] if positions else tensor.reshape(1)
            return bytes(picked.contiguous().view(torch.uint8).numpy().tobytes())
        with contextlib.ExitStack() as stack:
            if self.stream is not None and tensor.device == self.stream.device:
                stack.enter_context(torch.cuda.stream(self.stream))
            on_device = torch.stack(positions).to(tensor.device).unbind() if positions else ()
            picked = tensor[on_device] if on_device else tensor.reshape(1)
            host = picked.contiguous().view(torch.uint8).cpu()
        if self.stream is not None:
            self.stream.synchronize()
        return bytes(host.numpy().tobytes())


def _own_stream(device: torch.device) -> torch.cuda.Stream:
    """A non-blocking stream of the harness's own, made through the CUDA driver: a stream from
    torch's pools could be handed to the submission too, which could queue late work on it
    ahead of the reading. torch's pools where the driver cannot be reached."""
    try:
        create = ctypes.CDLL("libcuda.so.1").cuStreamCreate
        create.argtypes, create.restype = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint], ctypes.c_int
        handle = ctypes.c_void_p()
        if create(ctypes.byref(handle), 1) == 0 and handle.value:  # CU_STREAM_NON_BLOCKING
            return torch.cuda.ExternalStream(handle.value, device=device)  # type: ignore[no-untyped-call]
    except (OSError, AttributeError):
        pass
    return torch.cuda.Stream(device=device)  # type: ignore[no-untyped-call]


def _tensors(value: Any, depth: int = 0) -> list[torch.Tensor]:
    """The plain tensors in an output, in order (the output's other checks happen when it is
    shipped: ``harness/transfer.py``)."""
    if type(value) is torch.Tensor or type(value) is torch.nn.Parameter:
        return [value]
    found: list[torch.Tensor] = []
    if depth < MAX_DEPTH and isinstance(value, tuple | list | dict):
        for item in value.values() if isinstance(value, dict) else value:
            found.extend(_tensors(item, depth + 1))
    return found
