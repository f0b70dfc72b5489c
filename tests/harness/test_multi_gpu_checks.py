"""How a multi-GPU case shares its time between timed calls and checks (``multi_gpu._time_case``).

A check ships every rank's output to the reference ranks; through the host (no CUDA IPC) it can
cost more than a round's whole timing budget. The stop rule reads the timed calls' own time, the
case's share bounds calls and checks together, and checks are sampled only while they have cost
less than the timed calls. Here the group's two operations are stand-ins whose costs the test
sets: what is tested is the harness's loop, not the ranks.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kernelcup.harness import multi_gpu
from kernelcup.harness.benchmark import RANKED_PLAN
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.spec import Mode

CALL_NS = 250_000.0  # every rank's reading of every timed call: steady, so the interval is tight


@dataclass
class Group:
    world_size: int = 2
    activity: str = ""
    checks: list[float] = field(default_factory=list)


@dataclass
class Spec:
    mode: Mode = Mode.RANKED


def _run(monkeypatch: pytest.MonkeyPatch, check_s: float, share_s: float) -> tuple[int, int]:
    """(timed calls, checks) of one case whose checks take ``check_s`` each."""
    group = Group()
    monkeypatch.setattr(multi_gpu, "_timed_call", lambda _group, per_rank: [CALL_NS] * len(per_rank))

    def checked(_group: Any, per_rank: list[dict[str, Any]], run: bool) -> list[tuple[bool, str]]:
        time.sleep(check_s)
        group.checks.append(check_s)
        return [(True, "")] * len(per_rank)

    monkeypatch.setattr(multi_gpu, "_checked_call", checked)
    calls, _ = multi_gpu._time_case(
        Spec(), group, SeedPlan(1234), {"size": 8}, "benchmark 1 of 1", share_s,  # type: ignore[arg-type]
        random.Random(7),
    )
    return len(calls), len(group.checks)


def test_a_check_that_outlasts_the_timing_budget_does_not_leave_the_round_two_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls, checks = _run(monkeypatch, check_s=RANKED_PLAN.rule.max_seconds + 0.1, share_s=30.0)
    assert calls >= RANKED_PLAN.rule.min_runs
    assert checks == 1  # the first call's, never sampled again while checks cost more than calls


def test_the_case_share_still_bounds_calls_and_checks_together(monkeypatch: pytest.MonkeyPatch) -> None:
    check_s = 0.5
    calls, checks = _run(monkeypatch, check_s=check_s, share_s=check_s / 2)
    assert (calls, checks) == (2, 1)
