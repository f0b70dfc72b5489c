"""The rounds of a timed job, one scheduler for every kind of job (one process, or a group of
ranks): which case is timed when and with how much of the job's time, which round starts its
processes afresh, when one more round no longer fits, and when one more round settles the cases
whose rounds disagree (JOURNAL.md, Ranked rounds in fresh processes; Rounds that fit the time
limit)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kernelcup.harness.children import time_share
from kernelcup.harness.spec import Progress

if TYPE_CHECKING:
    from kernelcup.harness.benchmark import CaseTiming

# A round may take up to this multiple of the shares its cases were given before the next one is
# asked to fit in what is left (``RoundCost.next_fits``).
ROUND_FLOOR_RATIO = 1.15
# The next round must fit this multiple of what the last one took, and a start-up.
NEXT_ROUND_MARGIN = 1.2
# The extra round for cases whose rounds disagree runs only with this share of the job's time
# limit per such case still left.
EXTRA_ROUND_SHARE = 0.3


class Processes(Protocol):
    """Where a job's cases are timed: its submission's process, or its group of ranks."""

    def startup_estimate(self) -> float:
        """Seconds a fresh start is expected to take (a group: every rank's)."""

    def fresh_affordable(self, needed_after_s: float = 0.0) -> bool:
        """Whether a fresh start fits in the time left, with ``needed_after_s`` to spare."""

    def fresh(self, round_number: int) -> object:
        """End the current process (or group) and start another for this round (1-based)."""


# Time one case: (round index, case index, its seconds, whether its round started afresh).
TimeOne = Callable[[int, int, float, bool], "CaseTiming"]


@dataclass
class RoundCost:
    """What one round's cases were given and what they took."""

    shares_s: float = 0.0
    took_s: float = 0.0  # less the submission's idling (CaseTiming.idle_s)

    def add(self, share_s: float, took_s: float) -> None:
        self.shares_s += share_s
        self.took_s += took_s

    def next_fits(self, left_s: float, startup_s: float) -> bool:
        """Whether another round like this one fits in ``left_s``.

        Each case gets a share of the time left and stops timing when it runs out, so a round
        normally fits whatever is left. Not where the cases' least work (warm-up, at least two
        timed calls, a check, each on fresh inputs) outlasted their shares: a second-long call on
        inputs that take seconds to make would then run the job past its limit in the next
        round. Such a job is scored on the rounds it has, and its verdict says so. What a case
        took leaves out the submission's idling (``benchmark.idle_time``): a submission whose
        timed calls are quick cannot skip the fresh process of the next round by idling in its
        untimed ones, while a leaderboard whose inputs or checks are slow is judged by them
        whatever its calls take (JOURNAL.md, Rounds that fit the time limit)."""
        if self.took_s <= ROUND_FLOOR_RATIO * self.shares_s:
            return True
        return left_s >= NEXT_ROUND_MARGIN * self.took_s + startup_s


@dataclass
class Rounds:
    """``rounds`` rounds of ``cases`` cases (1: benchmark mode, in the process that ran the
    tests), then one more for the cases whose rounds disagree (``disagree``) where time allows."""

    cases: int
    rounds: int
    deadline: float
    timeout_s: float
    processes: Processes
    emit: Callable[[Progress], None]
    timings: list[list[CaseTiming]] = field(init=False)
    rounds_run: int = field(init=False)

    def __post_init__(self) -> None:
        self.timings = [[] for _ in range(self.cases)]
        self.rounds_run = self.rounds

    def run(self, time_one: TimeOne, disagree: Callable[[list[CaseTiming]], bool]) -> list[list[CaseTiming]]:
        """Every case's timings, round by round; ``rounds_run`` says how many rounds ran whole."""
        total = self.rounds * self.cases
        costs = [RoundCost() for _ in range(self.rounds + 1)]  # one more round included
        self.emit(Progress("benchmarking", 0, total))
        # The first round in a fresh process too, not after the tests in theirs, so that every
        # round starts alike: a process that ran the tests has compiled, captured and cached for
        # the tests' sizes (JOURNAL.md, Ranked rounds in fresh processes).
        fresh = self.rounds > 1 and self._fresh(1)
        orders = [(r, i) for r in range(self.rounds) for i in range(self.cases)]
        for done, (round_index, index) in enumerate(orders):
            if round_index > 0 and index == 0:
                if not costs[round_index - 1].next_fits(self._left(), self.processes.startup_estimate()):
                    self.rounds_run = round_index
                    self.emit(Progress("benchmarking", total, total))
                    break
                fresh = self._fresh(round_index + 1)  # between rounds, never while one is timed
            self._time(time_one, costs, round_index, index, fresh, total - done, self.rounds - 1 - round_index)
            self.emit(Progress("benchmarking", done + 1, total))
        if self.rounds > 1 and self.rounds_run == self.rounds:
            self._settle(time_one, costs, disagree)
        return self.timings

    def shortfall(self) -> str:
        """The verdict's note where fewer rounds ran than asked for, else nothing."""
        if self.rounds_run >= self.rounds:
            return ""
        plural = "s" if self.rounds_run > 1 else ""
        return (f"; timed in {self.rounds_run} round{plural} of {self.rounds}: the cases needed more than their "
                "share of the leaderboard's time limit, which held no further round")

    def _settle(self, time_one: TimeOne, costs: list[RoundCost],
                disagree: Callable[[list[CaseTiming]], bool]) -> None:
        """One more round for the cases whose rounds disagree, while time is left for it."""
        split = [i for i, timings in enumerate(self.timings) if disagree(timings)]
        needed_s = EXTRA_ROUND_SHARE * self.timeout_s / self.cases
        fresh = bool(split) and self._fresh(self.rounds + 1, needed_s)
        for position, index in enumerate(split):
            if self._left() > needed_s:
                self._time(time_one, costs, self.rounds, index, fresh, len(split) - position, 0)

    def _time(self, time_one: TimeOne, costs: list[RoundCost], round_index: int, index: int, fresh: bool,
              slots_left: int, starts_left: int) -> None:
        seconds = time_share(self._left(), slots_left, starts_left, self.processes.startup_estimate())
        begun = time.monotonic()
        timing = time_one(round_index, index, seconds, fresh)
        costs[round_index].add(seconds, time.monotonic() - begun - timing.idle_s)
        self.timings[index].append(timing)

    def _fresh(self, round_number: int, needed_after_s: float = 0.0) -> bool:
        if not self.processes.fresh_affordable(needed_after_s):
            return False
        self.processes.fresh(round_number)
        return True

    def _left(self) -> float:
        return self.deadline - time.monotonic()
