"""A call's inputs before it and its output as it was when its timing ended, to catch work
done outside the timed call.

Inputs. A submission can wrap the child's generator (it runs in the same process) and fill the
output buffers while the inputs are made, untimed; its timed call then does nothing. Right
after generating a call's inputs, before any code of the submission's runs again, the child
reads a few elements of every input tensor, output buffers included (still holding the poison
the generator planted), at places drawn from the operating system's randomness. When the
harness checks that call, it reads the same places of its own copy of the inputs.

Output. A submission can hand its work to a thread (or leave a kernel to be launched from one) and
return before the work is done: the timed call then reads a few microseconds, and the output
is complete by the time the harness asks for it, a socket round trip later. Right after each
timed call (the device synchronized, so every kernel the call queued has finished) the child
reads a few elements of the output at positions drawn there and then from the operating
system's randomness, on a stream of its own that waits for no other. When the harness later
asks for that call's output, the same elements are read again: if any changed, the output
was still being written after the call returned, and the run fails.

An honest submission's output cannot change in between: no call runs, and whatever the call
left on a side stream was waited for before the reading. Imported before the submission, so
the randomness and the stream are the harness's.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from dataclasses import dataclass
from typing import Any

import torch

SAMPLES = 64
INPUT_SAMPLES = 32  # per input tensor
MAX_INPUT_TENSORS = 32
MAX_DEPTH = 8
_random_bytes = os.urandom  # captured before the submission is imported

_SAME_SIZE_INTEGER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass
class Witness:
    tensor: int  # which of the value's tensors, in the order ``_tensors`` walks them
    positions: tuple[torch.Tensor, ...]  # one flat index tensor, or one per dimension; on the CPU
    values: bytes

    def to_message(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "positions": [p.tolist() for p in self.positions], "values": self.values.hex()}

    @classmethod
    def from_message(cls, message: Any) -> Witness | None:
        """A witness the child sent; None for anything malformed (the child is not trusted)."""
        try:
            tensor, positions, values = message["tensor"], message["positions"], message["values"]
            if not isinstance(tensor, int) or not 0 <= tensor < MAX_INPUT_TENSORS or not isinstance(values, str):
                return None
            if not isinstance(positions, list) or not 0 < len(positions) <= 8:
                return None
            rows = []
            for row in positions:
                if not isinstance(row, list) or len(row) != INPUT_SAMPLES or not all(type(i) is int for i in row):
                    return None
                rows.append(torch.tensor(row, dtype=torch.int64))
            return cls(tensor, tuple(rows), bytes.fromhex(values[: 2 * 16 * INPUT_SAMPLES]))
        except (KeyError, TypeError, ValueError, OverflowError):
            return None


class Witnesses:
    """Readings of outputs for one child: a generator and, on a GPU, a stream of their own."""

    def __init__(self, device: torch.device) -> None:
        self.generator = torch.Generator()
        self.stream = _own_stream(device) if device.type == "cuda" else None

    def take(self, value: Any) -> Witness | None:
        """Read ``SAMPLES`` elements of one of ``value``'s tensors, chosen now; None where
        ``value`` holds no element, or where it cannot be read (shipping it says why)."""
        try:
            return self._take(value)
        except Exception:
            return None

    def take_each(self, data: Any) -> list[Witness]:
        """``INPUT_SAMPLES`` elements of every tensor of a call's inputs, read in stream order
        right after they were generated (so also in the output buffers the generator poisoned):
        the harness reads the same places of its own copy when it checks the call."""
        try:
            self.generator.manual_seed(int.from_bytes(_random_bytes(8), "little") >> 1)
            chosen = [
                (index, tensor, _positions(tensor, INPUT_SAMPLES, self.generator))
                for index, tensor in enumerate(_tensors(data)[:MAX_INPUT_TENSORS])
                if tensor.numel() > 0
            ]
            values = read_many([(tensor, positions) for _, tensor, positions in chosen])
        except Exception:
            return []
        return [Witness(index, positions, value) for (index, _, positions), value in zip(chosen, values, strict=True)]

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
        positions = _positions(tensor, SAMPLES, self.generator)
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
        """On a GPU, on the harness's own stream: what memory holds now, whatever is queued."""
        if tensor.device.type == "cpu" or self.stream is None or tensor.device != self.stream.device:
            return read(tensor, positions)
        with torch.cuda.stream(self.stream):
            values = read(tensor, positions)
        self.stream.synchronize()
        return values


def read(tensor: torch.Tensor, positions: tuple[torch.Tensor, ...]) -> bytes:
    """The bytes of ``tensor`` at ``positions``, read on the current stream."""
    return read_many([(tensor, positions)])[0]


def read_many(wanted: list[tuple[torch.Tensor, tuple[torch.Tensor, ...]]]) -> list[bytes]:
    """The bytes of each tensor at its positions, read on the current stream: on a GPU with one
    copy of all positions to the device and one copy of all values back."""
    if not wanted:
        return []
    devices = {tensor.device for tensor, _ in wanted}
    if len(devices) > 1:  # each read where it is
        return [read_many([one])[0] for one in wanted]
    device = devices.pop()
    rows = [row for _, positions in wanted for row in positions]
    if device.type != "cpu" and rows:
        rows = list(torch.cat(rows).to(device).split([len(row) for row in rows]))  # type: ignore[no-untyped-call]
    picked = []
    for tensor, positions in wanted:
        own, rows = rows[: len(positions)], rows[len(positions) :]
        integers = _SAME_SIZE_INTEGER.get(tensor.element_size())
        if integers is not None and not tensor.is_complex():
            # Bytes, not values: NaN equals itself, and fp8/fp4 dtypes have no indexing kernels.
            tensor = tensor.view(integers)
        if len(positions) == 1 and tensor.dim() != 1:
            tensor = tensor.reshape(-1)  # contiguous when read: a view
        value = tensor[tuple(own)] if own else tensor.reshape(1)
        picked.append(value.contiguous().view(torch.uint8).reshape(-1))
    host = torch.cat(picked).cpu().numpy().tobytes()
    sizes = [len(p) for p in picked]
    out, start = [], 0
    for size in sizes:
        out.append(bytes(host[start : start + size]))
        start += size
    return out


def _positions(tensor: torch.Tensor, count: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    if tensor.is_contiguous():  # one index into the flat tensor
        return (torch.randint(tensor.numel(), (count,), generator=generator),)
    return tuple(torch.randint(size, (count,), generator=generator) for size in tensor.shape)


def inputs_differ(witnesses: list[Witness], data: Any) -> str:
    """Harness side: where the inputs the child reported differ from ``data`` (the harness's own
    copy of them), in words; "" where they agree. Floating-point values may differ in their
    last bits (a generator with atomics); NaN agrees with NaN."""
    tensors = _tensors(data)
    for seen, mine in zip(witnesses, reread(witnesses, data), strict=True):
        if mine is None:
            return f"input tensor {seen.tensor} (missing, or without those positions)"
        tensor = tensors[seen.tensor]
        if mine.values != seen.values and not _close(mine.values, seen.values, tensor.dtype):
            return f"input tensor {seen.tensor} ({tuple(tensor.shape)}, {str(tensor.dtype).removeprefix('torch.')})"
    return ""


def reread(witnesses: list[Witness], data: Any) -> list[Witness | None]:
    """The same places read from ``data`` instead; None for each that ``data`` lacks."""
    tensors = _tensors(data)
    again: list[Witness | None] = []
    for seen in witnesses:
        value = None
        if seen.tensor < len(tensors):
            with contextlib.suppress(IndexError, RuntimeError):
                value = read(tensors[seen.tensor], seen.positions)
        again.append(None if value is None else Witness(seen.tensor, seen.positions, value))
    return again


def _close(a: bytes, b: bytes, dtype: torch.dtype) -> bool:
    if len(a) != len(b) or not (dtype.is_floating_point or dtype.is_complex) or dtype.itemsize < 2:
        return False
    try:
        wide = torch.float64 if dtype.is_floating_point else torch.complex128
        left = torch.frombuffer(bytearray(a), dtype=dtype).to(wide)
        right = torch.frombuffer(bytearray(b), dtype=dtype).to(wide)
    except (RuntimeError, TypeError, ValueError):
        return False
    return bool(torch.allclose(left, right, rtol=1e-5, atol=1e-6, equal_nan=True))


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
