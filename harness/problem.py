"""The leaderboard's own Python code, as both harness processes use it.

``reference.py`` gives ``generate_input``, ``ref_kernel``, ``check_implementation`` and, as
kernelcup extensions, ``flops`` and ``bytes``. The harness process and the submission's process
each import it and generate the same inputs from the same seeds: the harness checks outputs
against its own copy, which the submission can never reach.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import inspect
import json
import math
import random
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import torch
from torch.overrides import TorchFunctionMode

from kernelcup.harness.spec import Case
from kernelcup.harness.verdict import missing_package, needs_package

POISON_FLOAT = math.nan


class ProblemError(Exception):
    """The leaderboard's code is broken: a harness ERROR, never the submitter's fault."""


def case_seed(case: Case) -> int:
    """The seed of one ``generate_input`` call: the case's own ``seed``, else one drawn from the
    case's arguments (the same in every process)."""
    seed = case.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        return seed
    text = json.dumps(case, sort_keys=True, default=str)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1


def seed_global_rngs(seed: int) -> None:
    """Seed every global RNG a ``generate_input`` may draw from without a generator of its own.

    GPU MODE's problems do (a model's weights from ``torch.randn``): seeded from the case, both
    harness processes draw the same data, and the fingerprint comparison stays a guard.
    ``torch.manual_seed`` covers the CPU and every CUDA device.
    """
    random.seed(seed)
    torch.manual_seed(seed % 2**64)
    numpy = sys.modules.get("numpy")  # torch imports it where it is installed
    if numpy is not None:
        numpy.random.seed(seed % 2**32)


def poison_(tensor: torch.Tensor) -> None:
    """Fill a tensor with a value no correct kernel writes: NaN, or all bits set for integers."""
    if tensor.numel() == 0:
        return
    with torch.no_grad():
        try:
            if tensor.is_floating_point() or tensor.is_complex():
                tensor.fill_(POISON_FLOAT)
            elif tensor.dtype == torch.bool:
                tensor.fill_(True)
            elif tensor.dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64):
                tensor.fill_(torch.iinfo(tensor.dtype).max)
            else:
                tensor.fill_(-1)
        except (RuntimeError, NotImplementedError):  # no fill kernel (packed fp4): all bits set
            # (a layout that cannot be viewed as bytes stays as allocated)
            with contextlib.suppress(RuntimeError, NotImplementedError):
                tensor.view(torch.uint8).fill_(0xFF)


_UNINITIALIZED: set[Any] = {
    torch.empty,
    torch.empty_like,
    torch.empty_strided,
    torch.Tensor.new_empty,
    torch.Tensor.new_empty_strided,
}


class PoisonUninitialized(TorchFunctionMode):
    """While active, every tensor created uninitialized (``torch.empty`` and friends) is poisoned.

    ``generate_input`` allocates the output buffers it hands to a kernel with ``empty``; under
    this mode those buffers hold NaN, so a kernel that leaves part of its output unwritten
    fails instead of passing on stale memory that happens to hold the right answer.
    """

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        result = func(*args, **(kwargs or {}))
        if func in _UNINITIALIZED and isinstance(result, torch.Tensor):
            poison_(result)
        return result


class Problem:
    """``reference.py`` (and its helpers) imported from a leaderboard directory."""

    def __init__(self, directory: Path) -> None:
        if str(directory) not in sys.path:
            sys.path.insert(0, str(directory))
        try:
            self.module = importlib.import_module("reference")
        except BaseException as exc:
            package = missing_package(str(exc)) if isinstance(exc, ModuleNotFoundError) else ""
            if package:
                raise ProblemError(f"reference.py cannot run here: {needs_package(package)}") from exc
            raise ProblemError(f"reference.py failed to import: {type(exc).__name__}: {exc}") from exc
        generate = getattr(self.module, "generate_input", None)
        if not callable(generate):
            raise ProblemError("reference.py defines no generate_input")
        self._generate: Callable[..., Any] = generate
        try:
            parameters = inspect.signature(generate).parameters
        except (TypeError, ValueError):
            parameters = {}  # type: ignore[assignment]
        self._takes_device = "device" in parameters

    def generate(self, case: Case, device: str) -> Any:
        """Inputs for one case on ``device``, output buffers poisoned.

        ``device`` is passed only where ``generate_input`` declares it: problems from the wild
        that hard-code "cuda" keep working on a GPU and fail clearly elsewhere.
        """
        kwargs = dict(case)
        if self._takes_device:
            kwargs["device"] = device
        seed_global_rngs(case_seed(case))
        with PoisonUninitialized():
            return self._generate(**kwargs)

    def reference(self, data: Any) -> Any:
        ref = getattr(self.module, "ref_kernel", None)
        if not callable(ref):
            raise ProblemError("reference.py defines no ref_kernel")
        return ref(data)

    def check(self, data: Any, output: Any) -> tuple[bool, str]:
        """Run ``check_implementation``; both its newer ``(ok, message)`` and older string forms."""
        check = getattr(self.module, "check_implementation", None)
        if not callable(check):
            raise ProblemError("reference.py defines no check_implementation")
        return normalize_check(check(data, output))

    def has_reference(self) -> bool:
        return callable(getattr(self.module, "ref_kernel", None))

    def work(self, case: Case) -> tuple[float | None, float | None]:
        """``flops(**case)`` and ``bytes(**case)`` where reference.py defines them."""
        return _extension(self.module, "flops", case), _extension(self.module, "bytes", case)


class WorkSource(Protocol):
    def work(self, case: Case) -> tuple[float | None, float | None]: ...


class Work:
    """``flops`` and ``bytes`` alone, for leaderboards whose reference is not Python (``lang: cu``).

    They come from a ``reference.py`` among the leaderboard's files when it has one (it needs
    only the standard library), and give a CUDA leaderboard the same GB/s, TFLOP/s and physical
    floor as a Python one. The source is taken from the job spec, never from the directory the
    submission runs in.
    """

    def __init__(self, source: str | None) -> None:
        self.module: Any = None
        if source is None:
            return
        module = types.ModuleType("reference")
        try:
            exec(compile(source, "reference.py", "exec"), module.__dict__)
        except BaseException as exc:
            raise ProblemError(f"reference.py failed to load: {type(exc).__name__}: {exc}") from exc
        self.module = module

    def work(self, case: Case) -> tuple[float | None, float | None]:
        return _extension(self.module, "flops", case), _extension(self.module, "bytes", case)


def _extension(module: Any, name: str, case: Case) -> float | None:
    function = getattr(module, name, None)
    if not callable(function):
        return None
    try:
        value = float(function(**case))
    except Exception as exc:
        raise ProblemError(f"reference.py's {name}() failed: {type(exc).__name__}: {exc}") from exc
    return value if math.isfinite(value) and value > 0 else None


def normalize_check(result: Any) -> tuple[bool, str]:
    """``(ok, message)`` from whatever a ``check_implementation`` returned.

    GPU MODE's older problems return an error string, empty (or None) meaning success.
    """
    if result is None:
        return True, ""
    if isinstance(result, str):
        return (not result), result
    if isinstance(result, bool):
        return result, "" if result else "check_implementation returned False"
    if isinstance(result, tuple | list) and len(result) == 2:
        ok, message = result
        return bool(ok), str(message or "")
    raise ProblemError(f"check_implementation returned {type(result).__name__}; expected (ok, message) or a string")
