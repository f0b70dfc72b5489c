"""Moving a submission's output from its process to the harness without trusting it.

The child flattens the output into a JSON tree whose leaves are tensor descriptors, and sends
the tensors' bytes either as the message payload (CPU, or when CUDA IPC is unavailable) or by
copying them on the GPU into a staging buffer that the harness allocated and shared through
CUDA IPC (no round trip through the host for large outputs). The harness rebuilds plain
``torch.Tensor`` objects from bytes it owns; nothing the child sends is ever unpickled.
"""

from __future__ import annotations

import ctypes
from typing import Any

import torch

MAX_DEPTH = 8
MAX_TENSORS = 256
ALIGN = 256


class OutputError(Exception):
    """The output is not made of tensors and plain values (a user error)."""


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    value = getattr(torch, name, None) if name.isidentifier() else None
    if not isinstance(value, torch.dtype):
        raise OutputError(f"unknown dtype {name!r}")
    return value


def flatten(output: Any) -> tuple[Any, list[torch.Tensor]]:
    """A JSON tree for ``output`` and its tensors in order (child side)."""
    tensors: list[torch.Tensor] = []

    def visit(value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise OutputError("output is nested too deeply")
        if isinstance(value, torch.Tensor):
            if type(value) not in (torch.Tensor, torch.nn.Parameter):
                raise OutputError(
                    f"output holds a {type(value).__name__}, a tensor subclass; return a plain torch.Tensor"
                )
            if value.layout != torch.strided or value.device.type not in ("cpu", "cuda"):
                raise OutputError(
                    f"output tensor has layout {value.layout} on {value.device}; expected a dense "
                    "tensor on the CPU or a GPU"
                )
            if len(tensors) >= MAX_TENSORS:
                raise OutputError("output holds too many tensors")
            tensors.append(value.detach())
            return {
                "tensor": len(tensors) - 1,
                "dtype": _dtype_name(value.dtype),
                "shape": list(value.shape),
                "device": str(value.device),
            }
        if value is None or isinstance(value, bool | int | float | str):
            return {"value": value}
        if isinstance(value, tuple | list):
            kind = "tuple" if isinstance(value, tuple) else "list"
            return {kind: [visit(item, depth + 1) for item in value]}
        if isinstance(value, dict):
            if not all(isinstance(key, str | int) for key in value):
                raise OutputError("output dict keys must be strings or integers")
            return {"dict": [[key, visit(item, depth + 1)] for key, item in value.items()]}
        raise OutputError(
            f"output holds a {type(value).__module__}.{type(value).__qualname__}; expected "
            "torch.Tensor objects (in tuples, lists or dicts)"
        )

    return visit(output, 0), tensors


def rebuild(tree: Any, tensors: list[torch.Tensor]) -> Any:
    """The output object from a tree and the harness-owned tensors (harness side)."""

    def visit(node: Any, depth: int) -> Any:
        if depth > MAX_DEPTH or not isinstance(node, dict) or len(node) == 0:
            raise OutputError("malformed output tree")
        if "tensor" in node:
            index = node["tensor"]
            if not isinstance(index, int) or not 0 <= index < len(tensors):
                raise OutputError("malformed output tree")
            return tensors[index]
        if "value" in node:
            value = node["value"]
            if value is not None and not isinstance(value, bool | int | float | str):
                raise OutputError("malformed output tree")
            return value
        if "tuple" in node and isinstance(node["tuple"], list):
            return tuple(visit(item, depth + 1) for item in node["tuple"])
        if "list" in node and isinstance(node["list"], list):
            return [visit(item, depth + 1) for item in node["list"]]
        if "dict" in node and isinstance(node["dict"], list):
            out = {}
            for pair in node["dict"]:
                if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str | int)):
                    raise OutputError("malformed output tree")
                out[pair[0]] = visit(pair[1], depth + 1)
            return out
        raise OutputError("malformed output tree")

    return visit(tree, 0)


def tensor_leaves(tree: Any) -> list[dict[str, Any]]:
    """The tensor descriptors of a tree, in index order."""
    found: list[dict[str, Any]] = []

    def visit(node: Any, depth: int) -> None:
        if depth > MAX_DEPTH or not isinstance(node, dict):
            return
        if "tensor" in node:
            found.append(node)
            return
        for key in ("tuple", "list"):
            if isinstance(node.get(key), list):
                for item in node[key]:
                    visit(item, depth + 1)
        if isinstance(node.get("dict"), list):
            for pair in node["dict"]:
                if isinstance(pair, list) and len(pair) == 2:
                    visit(pair[1], depth + 1)

    visit(tree, 0)
    found.sort(key=lambda leaf: leaf["tensor"] if isinstance(leaf["tensor"], int) else -1)
    return found


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def host_bytes(tensor: torch.Tensor) -> bytes:
    """The raw bytes of a tensor (copied to the host), without numpy."""
    flat = tensor.contiguous().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    if flat.numel() == 0:
        return b""
    # Not ctypes.string_at: its size is a C int, so a tensor past 2 GiB comes back empty or read
    # as a C string, which the harness would take for "payload too short".
    return bytes((ctypes.c_char * (flat.numel() * flat.element_size())).from_address(flat.data_ptr()))


MAX_PAYLOAD = 16 << 30  # bytes of output over the host, whatever the case's size


def payload_limit(floor: int, inputs: Any) -> int:
    """The most output bytes the harness takes over the host for a case: ``floor``, or twice its
    inputs where that is more (the Cholesky factor of a 32768² matrix is 4 GiB, as its input)."""
    return min(MAX_PAYLOAD, max(floor, 2 * nbytes_of(inputs)))


def nbytes_of(data: Any) -> int:
    """Bytes of the tensors in ``data`` (tensors, tuples, lists and dicts of them)."""
    if isinstance(data, torch.Tensor):
        return data.numel() * data.element_size()
    if isinstance(data, tuple | list):
        return sum(nbytes_of(item) for item in data)
    if isinstance(data, dict):
        return sum(nbytes_of(item) for item in data.values())
    return 0


def staging_bytes_needed(tensors: list[torch.Tensor]) -> int:
    return sum(_align(t.numel() * t.element_size()) for t in tensors if t.device.type == "cuda")


def pack(tensors: list[torch.Tensor], staging: torch.Tensor | None) -> tuple[list[dict[str, Any]], bytes]:
    """Place each tensor in the staging buffer (GPU tensors) or the payload (child side).

    Returns one placement per tensor and the payload. The caller synchronizes the device
    before telling the harness that staged bytes are ready.
    """
    placements: list[dict[str, Any]] = []
    payload = bytearray()
    offset = 0
    for tensor in tensors:
        nbytes = tensor.numel() * tensor.element_size()
        if staging is not None and tensor.device.type == "cuda" and offset + nbytes <= staging.numel():
            if nbytes:
                source = tensor.contiguous().reshape(-1).view(torch.uint8)
                staging[offset : offset + nbytes].copy_(source)
            placements.append({"where": "staging", "offset": offset, "nbytes": nbytes})
            offset += _align(nbytes)
        else:
            placements.append({"where": "payload", "offset": len(payload), "nbytes": nbytes})
            payload += host_bytes(tensor)
    return placements, bytes(payload)


def unpack(
    tree: Any,
    placements: Any,
    payload: bytes,
    staging: torch.Tensor | None,
    device: str,
) -> Any:
    """Harness-owned tensors from placements, then the output object (harness side)."""
    leaves = tensor_leaves(tree)
    if not isinstance(placements, list) or len(placements) != len(leaves):
        raise OutputError("malformed output placements")
    tensors: list[torch.Tensor] = []
    for index, (leaf, place) in enumerate(zip(leaves, placements, strict=True)):
        if leaf.get("tensor") != index or not isinstance(place, dict):
            raise OutputError("malformed output tree")
        dtype = dtype_from_name(str(leaf.get("dtype")))
        shape = leaf.get("shape")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise OutputError("malformed tensor shape")
        numel = 1
        for size in shape:
            numel *= size
        nbytes = numel * dtype.itemsize
        offset = place.get("offset")
        if place.get("nbytes") != nbytes or not isinstance(offset, int) or offset < 0:
            raise OutputError("tensor size does not match its shape")
        where = place.get("where")
        target = _target_device(str(leaf.get("device")), device)
        if where == "payload":
            if offset + nbytes > len(payload):
                raise OutputError("payload too short")
            chunk = bytearray(payload[offset : offset + nbytes])
            raw = torch.frombuffer(chunk, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
            tensor = raw.view(dtype).reshape(shape).to(target)
        elif where == "staging" and staging is not None:
            if offset + nbytes > staging.numel():
                raise OutputError("staged tensor out of bounds")
            tensor = staging[offset : offset + nbytes].clone().view(dtype).reshape(shape)
        else:
            raise OutputError("malformed output placement")
        tensors.append(tensor)
    return rebuild(tree, tensors)


def _target_device(reported: str, harness_device: str) -> torch.device:
    """Where the harness rebuilds a tensor: the device type the child reported it on."""
    if reported.startswith("cuda") and harness_device == "cuda":
        return torch.device("cuda")
    return torch.device("cpu")
