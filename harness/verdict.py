"""How a run ends early, and the small formatting every verdict shares.

Kept free of torch so the harness can start the submission's process before it pays for
importing torch itself.
"""

from __future__ import annotations

from typing import Any

from harness.spec import Status


class RunEnded(Exception):
    """Raised anywhere in a run to end it with ``status`` and a one-line ``verdict``."""

    def __init__(self, status: Status, verdict: str) -> None:
        super().__init__(verdict)
        self.status = status
        self.verdict = verdict


def format_seconds(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds:.3f} s"


def describe_case(case: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in case.items())
