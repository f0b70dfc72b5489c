"""The one place for time limits: the harness's per mode, and every runner's, derived from it."""

from __future__ import annotations

import math
from typing import Any

from kernelcup.harness.spec import Mode

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


# After its own limit the harness needs a moment to stop the submission and write its result.
HARNESS_EXIT_S = 15.0


def remote_kill_s(harness_limit_s: float) -> float:
    """Where a remote runner's container kills a harness that overran its own limit; a harness
    that works reports its own timeout first."""
    return harness_limit_s + HARNESS_EXIT_S


def platform_timeout_s(max_harness_limit_s: float, startup_s: float) -> int:
    """A platform's own hard limit (Modal's function timeout, a workflow job's timeout): the remote
    kill of the longest harness limit it accepts plus the container's start-up, rounded up, so it
    never fires before the harness or the remote kill could report."""
    return math.ceil(remote_kill_s(max_harness_limit_s) + max(startup_s, 0.0))
