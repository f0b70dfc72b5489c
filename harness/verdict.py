"""How a run ends early, and the small formatting every verdict shares.

Kept free of torch so the harness can start the submission's process before it pays for
importing torch itself.
"""

from __future__ import annotations

import re
from typing import Any

from kernelcup.harness.spec import Status

_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")
_EXCEPTION_LINE = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b(: .*)?$")


class RunEnded(Exception):
    """Raised anywhere in a run to end it with ``status`` and a one-line ``verdict``.

    ``repeats``: the same start on the same machine would end the same way (a sandbox this
    machine cannot set up, no GPU where one was asked for), so no process is started again for it."""

    def __init__(self, status: Status, verdict: str, *, repeats: bool = False) -> None:
        super().__init__(verdict)
        self.status = status
        self.verdict = verdict
        self.repeats = repeats


def format_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:.3f} s"


def describe_case(case: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in case.items())


def missing_package(text: str) -> str:
    """The package a ``ModuleNotFoundError`` in ``text`` names, or ""."""
    match = _MISSING_MODULE.search(text)
    return match.group(1).split(".")[0] if match else ""


def needs_package(package: str) -> str:
    return f"it imports the Python package {package!r}, which is not installed on this machine"


def exception_in(stderr: str) -> str:
    """``": <the last exception line>"`` of a Python traceback in ``stderr``, or ""; a missing
    package is said in words."""
    lines = [line.strip() for line in stderr.splitlines() if _EXCEPTION_LINE.match(line.strip())]
    if not lines:
        return ""
    package = missing_package(lines[-1])
    return f": {needs_package(package)}" if package else f": {lines[-1][:300]}"


# A child's "tampered" message (``harness/integrity.py``): the submission changed the harness's code.
TAMPERED = "the submission changed the harness's own code in its process"
