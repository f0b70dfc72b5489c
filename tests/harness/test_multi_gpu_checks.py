"""How a multi-GPU case spends its time on timed calls and checks (``multi_gpu._time_case``).

A check ships every rank's output to the reference ranks; through the host (no CUDA IPC) it can
cost more than a round's whole timing budget. The first call's check, made in every round, is
outside the case's time; the rechecks drawn after it are in it, and which calls are rechecked
never depends on what checks cost (a submission wrong on every call but the first would
otherwise go unchecked wherever checks are dear). The group's two operations are stand-ins whose
costs the test sets: what is tested is the harness's loop, not the ranks.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import pytest

from kernelcup.harness import multi_gpu
from kernelcup.harness.benchmark import RANKED_PLAN
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.spec import Mode

CALL_NS = 250_000.0  # every rank's reading of every timed call: steady, so the interval is tight
BUDGET_S = RANKED_PLAN.rule.max_seconds


@dataclass
class Group:
    world_size: int = 2
    activity: str = ""
    checks: int = 0


@dataclass
class Spec:
    mode: Mode = Mode.RANKED


class Draws(random.Random):
    """Draws ``value`` every time: 0.0 rechecks every call, 1.0 none."""

    def __init__(self, value: float) -> None:
        super().__init__(0)
        self.value = value

    def random(self) -> float:
        return self.value


@dataclass
class Costs:
    first_check_s: float
    later_check_s: float = 0.0


def _run(monkeypatch: pytest.MonkeyPatch, costs: Costs, rng: random.Random) -> tuple[int, int]:
    """(timed calls, checks) of one ranked case."""
    group = Group()
    monkeypatch.setattr(multi_gpu, "_timed_call", lambda _group, per_rank: [CALL_NS] * len(per_rank))

    def checked(_group: Any, per_rank: list[dict[str, Any]], run: bool) -> list[tuple[bool, str]]:
        time.sleep(costs.first_check_s if group.checks == 0 else costs.later_check_s)
        group.checks += 1
        return [(True, "")] * len(per_rank)

    monkeypatch.setattr(multi_gpu, "_checked_call", checked)
    calls, _ = multi_gpu._time_case(
        Spec(), group, SeedPlan(1234), {"size": 8}, "benchmark 1 of 1", BUDGET_S,  # type: ignore[arg-type]
        rng,
    )
    return len(calls), group.checks


def test_the_first_calls_check_does_not_leave_the_round_two_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, checks = _run(monkeypatch, Costs(first_check_s=BUDGET_S + 0.1), Draws(1.0))
    assert calls >= RANKED_PLAN.rule.min_runs
    assert checks == 1


def test_calls_are_rechecked_however_dear_checks_are(monkeypatch: pytest.MonkeyPatch) -> None:
    calls, checks = _run(monkeypatch, Costs(first_check_s=0.2, later_check_s=0.05), Draws(0.0))
    assert checks == calls
    assert calls >= 2  # the rechecks are in the case's time, which they end
