"""Output checks shared by the shipped leaderboards (GPU MODE's ``utils.py``, same names).

Each task.yml copies this file next to ``reference.py`` as ``utils.py``, so it may import only
the standard library and torch. Every check returns the reasons an output is wrong (empty
when it is right), so a submitter reads how many elements differ and the worst of them with
their index, what they got and what was expected.

Conventions the leaderboards follow:

- ``generate_input(**case, device=...)`` seeds its own ``torch.Generator`` on that device and
  never touches the global RNG, so the same case gives the same data in every process.
- Where a leaderboard hands the kernel a preallocated output buffer, it is the *last* element
  of the ``data`` tuple. The harness fills it with NaN before each call, so a kernel that
  leaves part of it unwritten fails.
- NaN in an output never passes, whatever the tolerance.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

MAX_PRINT = 5


def make_generator(device: str | torch.device, seed: int) -> torch.Generator:
    """A generator on ``device`` seeded with ``seed``; inputs never use the global RNG."""
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


@contextlib.contextmanager
def ieee_fp32() -> Iterator[None]:
    """Full-precision fp32 matmul and convolution while a reference is computed.

    PyTorch lets cuDNN convolutions use TF32 by default, which would make the reference itself
    off by ~1e-3; the flags are restored afterwards so the submission's settings are untouched.
    """
    matmul_tf32 = torch.backends.cuda.matmul.allow_tf32
    cudnn_tf32 = torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul_tf32
        torch.backends.cudnn.allow_tf32 = cudnn_tf32


def check_layout(received: Any, expected: torch.Tensor) -> list[str]:
    """Type, shape, dtype and device of an output; the values are not looked at."""
    if not isinstance(received, torch.Tensor):
        return [f"expected a torch.Tensor, got {type(received).__name__}"]
    if received.shape != expected.shape:
        return [f"shape mismatch: got {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    if received.dtype != expected.dtype:
        return [f"dtype mismatch: got {received.dtype}, expected {expected.dtype}"]
    if received.device != expected.device:
        return [f"device mismatch: got a tensor on {received.device}, expected {expected.device}"]
    return []


def _format_index(flat: int, shape: torch.Size) -> str:
    if len(shape) == 0:
        return "()"
    index = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return "(" + ", ".join(str(i) for i in reversed(index)) + ")"


def _worst(
    received: torch.Tensor,
    expected: torch.Tensor,
    badness: torch.Tensor,
    mismatched: torch.Tensor,
    max_print: int,
    describe: Callable[[int], str],
) -> list[str]:
    count = int(mismatched.sum().item())
    total = mismatched.numel()
    reasons = [f"{count} of {total} elements differ ({100.0 * count / total:.3g}%)"]
    # The worst offenders first; NaN counts as infinitely bad.
    scores = torch.where(mismatched, badness, torch.full_like(badness, -math.inf)).flatten()
    top = torch.topk(scores, min(max_print, count)).indices.tolist()
    got = received.flatten()
    want = expected.flatten()
    for flat in top:
        reasons.append(
            f"at {_format_index(flat, received.shape)}: got {got[flat].item()}, "
            f"expected {want[flat].item()}{describe(flat)}"
        )
    if count > len(top):
        reasons.append(f"... and {count - len(top)} more")
    return reasons


@torch.no_grad()
def verbose_allclose(
    received: Any,
    expected: torch.Tensor,
    rtol: float = 1e-5,
    atol: float = 1e-8,
    max_print: int = MAX_PRINT,
) -> list[str]:
    """Why ``received`` is not within ``atol + rtol * |expected|`` of ``expected``, if it isn't.

    Compared in float64, so the comparison adds no rounding of its own. NaN in ``received``
    always fails; an infinity passes only where the same infinity was expected.
    """
    reasons = check_layout(received, expected)
    if reasons:
        return reasons
    got = received.double()
    want = expected.double()
    # An expected infinity allows no slack: only the same infinity matches it.
    allowed = torch.where(torch.isinf(want), 0.0, atol + rtol * want.abs())
    diff = (got - want).abs()
    same_infinity = torch.isinf(want) & (got == want)
    diff = torch.where(same_infinity, torch.zeros_like(diff), diff)
    diff = torch.nan_to_num(diff, nan=math.inf)  # NaN anywhere in got is a mismatch
    mismatched = diff > allowed
    if not bool(mismatched.any()):
        return []
    flat_diff = diff.flatten()
    flat_allowed = allowed.flatten()

    def describe(flat: int) -> str:
        return f" (|diff| {flat_diff[flat].item():.4g} > allowed {flat_allowed[flat].item():.4g})"

    return _worst(received, expected, diff - allowed, mismatched, max_print, describe)


@torch.no_grad()
def verbose_allequal(received: Any, expected: torch.Tensor, max_print: int = MAX_PRINT) -> list[str]:
    """Why ``received`` is not exactly ``expected`` (integer outputs), if it isn't."""
    reasons = check_layout(received, expected)
    if reasons:
        return reasons
    mismatched = received != expected
    if not bool(mismatched.any()):
        return []
    diff = (received.double() - expected.double()).abs()
    return _worst(received, expected, diff, mismatched, max_print, lambda flat: "")


def verdict(reasons: list[str]) -> tuple[bool, str]:
    """The ``(passed, message)`` pair that ``check_implementation`` returns."""
    if reasons:
        return False, "output does not match the reference: " + "; ".join(reasons)
    return True, ""


def match_reference(
    data: Any,
    output: Any,
    reference: Callable[[Any], torch.Tensor],
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> tuple[bool, str]:
    """The usual ``check_implementation``: compare ``output`` with ``reference(data)``."""
    return verdict(verbose_allclose(output, reference(data), rtol=rtol, atol=atol))


def make_match_reference(
    reference: Callable[[Any], torch.Tensor], **tolerances: float
) -> Callable[[Any, Any], tuple[bool, str]]:
    def check_implementation(data: Any, output: Any) -> tuple[bool, str]:
        return match_reference(data, output, reference=reference, **tolerances)

    return check_implementation
