"""Is an output right? The leaderboard's check decides, after a few refusals no check could overturn.

Runs in the harness process only, on inputs the harness generated itself and on tensors it
rebuilt from bytes, so nothing the submission controls takes part in the verdict except the
output's values.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelcup.harness.problem import Problem, ProblemError

MAX_WORST = 3
MAX_MESSAGE = 600


class LeaderboardFault(Exception):
    """The reference or the check itself failed on a well-formed output: an ERROR verdict."""


def clone_tree(data: Any) -> Any:
    if isinstance(data, torch.Tensor):
        return data.clone()
    if isinstance(data, tuple):
        return tuple(clone_tree(item) for item in data)
    if isinstance(data, list):
        return [clone_tree(item) for item in data]
    if isinstance(data, dict):
        return {key: clone_tree(value) for key, value in data.items()}
    return data


def _index(flat: int, shape: torch.Size) -> str:
    if len(shape) == 0:
        return "()"
    parts = []
    for size in reversed(shape):
        parts.append(flat % size)
        flat //= size
    return "(" + ", ".join(str(p) for p in reversed(parts)) + ")"


def refusals(output: Any, expected: Any, where: str = "output") -> list[str]:
    """What no ``check_implementation`` could accept, compared with the reference's output.

    Only structure: no tensor where the reference returns one, another number of items, other
    dict keys. Shape, dtype and device are the problem's check to judge (:func:`differences`):
    a reference may compute in float64 what the submission writes into a float32 buffer.
    """
    if isinstance(expected, torch.Tensor):
        if not isinstance(output, torch.Tensor):
            return [f"{where} should be a torch.Tensor, got {type(output).__name__}"]
        return []
    if isinstance(expected, tuple | list):
        if not isinstance(output, tuple | list) or len(output) != len(expected):
            return [f"{where} should be a sequence of {len(expected)} items"]
        found: list[str] = []
        for i, (got, want) in enumerate(zip(output, expected, strict=True)):
            found += refusals(got, want, f"{where}[{i}]")
        return found
    if isinstance(expected, dict):
        if not isinstance(output, dict) or set(output) != set(expected):
            return [f"{where} should be a dict with keys {sorted(map(str, expected))}"]
        found = []
        for key in expected:
            found += refusals(output[key], expected[key], f"{where}[{key!r}]")
        return found
    return []


def differences(output: Any, expected: Any) -> list[str]:
    """Shape, dtype and device of each output tensor where they differ from the reference's.

    Never a verdict by themselves: they explain a check that failed or could not run.
    """
    found = []
    for where, got, want in _pairs(output, expected):
        if got.shape != want.shape:
            found.append(f"{where} has shape {tuple(got.shape)}, the reference {tuple(want.shape)}")
        if got.dtype != want.dtype:
            found.append(f"{where} has dtype {got.dtype}, the reference {want.dtype}")
        if got.device.type != want.device.type:
            found.append(f"{where} is on {got.device.type}, the reference on {want.device.type}")
    return found


def _pairs(output: Any, expected: Any, where: str = "output") -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    if isinstance(expected, torch.Tensor) and isinstance(output, torch.Tensor):
        return [(where, output, expected)]
    pairs: list[tuple[str, torch.Tensor, torch.Tensor]] = []
    if isinstance(expected, tuple | list) and isinstance(output, tuple | list):
        for i, (got, want) in enumerate(zip(output, expected, strict=False)):
            pairs += _pairs(got, want, f"{where}[{i}]")
    elif isinstance(expected, dict) and isinstance(output, dict):
        for key in expected:
            if key in output:
                pairs += _pairs(output[key], expected[key], f"{where}[{key!r}]")
    return pairs


@torch.no_grad()
def nan_problems(output: Any, expected: Any) -> list[str]:
    """NaN never passes: NaN where the reference has none fails, whatever the check says."""
    found = []
    for where, got, want in _pairs(output, expected):
        if not (got.is_floating_point() or got.is_complex()) or got.shape != want.shape:
            continue
        try:
            bad = torch.isnan(got) & ~torch.isnan(want.to(got.device))
        except (RuntimeError, NotImplementedError):  # packed fp4, fp8 without kernels: the check decides
            continue
        count = int(bad.sum().item())
        if count:
            first = int(torch.nonzero(bad.flatten())[0].item())
            found.append(f"{where} has NaN in {count} of {got.numel()} elements, first at {_index(first, got.shape)}")
    return found


@torch.no_grad()
def worst_mismatches(output: Any, expected: Any) -> str:
    """The largest differences with their index, for checks whose message shows none."""
    lines = []
    for where, got, want in _pairs(output, expected):
        if got.shape != want.shape or got.numel() == 0:
            continue
        try:
            diff = (got.double() - want.to(got.device).double()).abs()
        except (RuntimeError, NotImplementedError):  # a dtype without arithmetic (packed fp4)
            continue
        diff = torch.nan_to_num(diff, nan=math.inf)
        wrong = int((diff > 0).sum().item())
        if not wrong:
            continue
        top = torch.topk(diff.flatten(), min(MAX_WORST, wrong)).indices.tolist()
        flat_got, flat_want = got.flatten(), want.flatten()
        shown = ", ".join(
            f"at {_index(i, got.shape)} got {flat_got[i].item():.6g}, expected {flat_want[i].item():.6g}" for i in top
        )
        lines.append(f"{where}: {wrong} of {got.numel()} elements differ; worst {shown}")
    return "; ".join(lines)


def check_output(problem: Problem, data: Any, output: Any) -> tuple[bool, str]:
    """``(ok, message)`` for one output against the harness's own ``data``.

    The problem's ``check_implementation`` is the authority; kernelcup refuses on its own only
    what no check could accept (:func:`refusals`; the child refuses tensor subclasses and
    non-tensor values before anything is shipped) and NaN where the reference has none.
    """
    expected = None
    unlike: list[str] = []
    if problem.has_reference():
        try:
            expected = problem.reference(clone_tree(data))
        except torch.cuda.OutOfMemoryError:
            # The harness's own reference run is extra (GPU MODE's check runs the reference
            # again): without the memory for both, the check alone decides.
            expected = None
            _release_memory()
        except Exception as exc:
            raise LeaderboardFault(f"ref_kernel failed: {type(exc).__name__}: {exc}") from exc
        if expected is not None:
            refused = refusals(output, expected)
            if refused:
                return False, "; ".join(refused)
            unlike = differences(output, expected)
    try:
        try:
            ok, message = problem.check(data, output)
        except torch.cuda.OutOfMemoryError:
            expected = None  # what the harness holds goes first; the check is the authority
            _release_memory()
            ok, message = problem.check(data, output)
    except ProblemError as exc:
        raise LeaderboardFault(str(exc)) from exc
    except torch.cuda.OutOfMemoryError as exc:
        raise LeaderboardFault(
            "the GPU ran out of memory while the leaderboard's check_implementation ran on this output "
            f"(its inputs, the output and the check's own work did not fit): {_first_sentence(exc)}"
        ) from exc
    except Exception as exc:
        if expected is not None and not unlike:
            raise LeaderboardFault(
                f"check_implementation failed on a well-formed output: {type(exc).__name__}: {exc}"
            ) from exc
        because = f" ({'; '.join(unlike)})" if unlike else ""
        return False, _shorten(f"check_implementation could not check the output{because}: {type(exc).__name__}: {exc}")
    if expected is not None:
        nans = nan_problems(output, expected)
        if nans:
            return False, "; ".join(nans)
        if not ok and "expected" not in message:
            worst = worst_mismatches(output, expected)
            message = f"{message}; {worst}" if message and worst else (message or worst)
        if not ok and unlike:
            message = f"{message}; {'; '.join(unlike)}" if message else "; ".join(unlike)
    if not ok and not message:
        message = "output does not match the reference"
    return ok, _shorten(message)


def _release_memory() -> None:
    """Give the harness's cached GPU memory back to the driver (after an out-of-memory)."""
    import gc

    gc.collect()
    release_memory("cuda")


def release_memory(device: str, keep_bytes: int = 0) -> None:
    """After a check: the harness's cached GPU memory back to the driver, for the submission's
    process that shares the GPU (a single-process evaluator would have it to itself). Where the
    cache holds less than ``keep_bytes`` unused, it is kept: the next check reuses it, and neither
    pays the driver's frees and allocations."""
    if device != "cuda" or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return
    if keep_bytes and torch.cuda.memory_reserved() - torch.cuda.memory_allocated() < keep_bytes:
        return
    torch.cuda.empty_cache()


def _first_sentence(exc: BaseException) -> str:
    return str(exc).split(". ")[0].strip()


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
