"""The one place for time limits: the harness's per mode, and every runner's, derived from it."""

from __future__ import annotations

from typing import Any

from harness.spec import Mode

_TASK_KEYS = {
    Mode.TEST: "test_timeout",
    Mode.BENCHMARK: "benchmark_timeout",
    Mode.RANKED: "ranked_timeout",
    Mode.PROFILE: "benchmark_timeout",
}


def harness_limit(task: dict[str, Any], mode: Mode, default_s: float) -> float:
    """Seconds the harness may spend on a mode, from task.yml (GPU MODE keys)."""
    return float(task.get(_TASK_KEYS[mode]) or default_s)


def runner_limit(harness_limit_s: float, grace_s: float) -> float:
    """A runner's own limit always exceeds the harness's, so the harness reports its own timeout."""
    return harness_limit_s + max(grace_s, 1.0)
