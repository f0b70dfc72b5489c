"""A cheap summary of generated inputs, to tell that two processes generated the same data.

The harness checks the submission's outputs against inputs it generated itself; comparing
fingerprints shows that the submission's process received the same data (a leaderboard whose
``generate_input`` is not deterministic is a leaderboard bug, and a submission that tampers
with its inputs before the call is caught).
"""

from __future__ import annotations

import math
from typing import Any

import torch

Fingerprint = list[Any]


@torch.no_grad()
def fingerprint(data: Any, depth: int = 0) -> Fingerprint:
    if depth > 8:
        return ["deep"]
    if isinstance(data, torch.Tensor):
        values = data.detach()
        if values.is_complex():
            values = torch.view_as_real(values)
        head = ["tensor", str(data.dtype), list(data.shape)]
        if values.numel() == 0:
            return [*head, 0.0, 0.0, 0]
        try:
            if values.is_floating_point():
                finite = torch.isfinite(values)
                nonfinite = int(values.numel() - finite.sum().item())
                cleaned = torch.nan_to_num(values, nan=0.0, posinf=0.0, neginf=0.0)
                total = float(cleaned.sum(dtype=torch.float64).item())
                norm = float(torch.linalg.vector_norm(cleaned, dtype=torch.float64).item())
                return [*head, total, norm, nonfinite]
            as_int = values.to(torch.int64)
            total = float(as_int.sum().item())
            return [*head, total, float(as_int.abs().max().item()), 0]
        except (RuntimeError, NotImplementedError):  # a dtype without these kernels (fp4, some fp8)
            return [*head, *_bytes_print(values)]
    if isinstance(data, tuple | list):
        return ["seq", [fingerprint(item, depth + 1) for item in data]]
    if isinstance(data, dict):
        return ["map", [[str(k), fingerprint(v, depth + 1)] for k, v in data.items()]]
    if isinstance(data, bool | int | str) or data is None:
        return ["value", data]
    if isinstance(data, float):
        return ["value", data if math.isfinite(data) else str(data)]
    return ["object", type(data).__name__]


def _bytes_print(values: torch.Tensor) -> list[Any]:
    """Sum and largest byte of a tensor's raw bytes, for dtypes arithmetic does not support
    (packed fp4, the fp8 variants without kernels); the layout alone where even that fails."""
    try:
        raw = values.contiguous().flatten().view(torch.uint8).to(torch.int64)
        return [float(raw.sum().item()), float(raw.max().item()), 0]
    except (RuntimeError, NotImplementedError):
        return []


def same(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """Whether two fingerprints match (float sums within a tiny relative tolerance)."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel, abs_tol=1e-6)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rel) for x, y in zip(a, b, strict=True))
    return bool(a == b)
