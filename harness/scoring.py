"""The one place that turns per-case medians into a leaderboard score.

The core imports :func:`combine` to rank stored results; the harness uses it for
``Result.score_s``. Scores are in seconds and lower is better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kernelcup.harness.spec import CaseResult, Result, Status
from kernelcup.harness.verdict import RunEnded

RANKINGS = ("last", "mean", "geom")


def combine(ranking_by: str, medians_s: Sequence[float]) -> float:
    """Combine per-case medians (seconds) the way task.yml's ``ranking_by`` asks.

    ``last`` ranks by the last benchmark alone (GPU MODE's default), ``mean`` by the arithmetic
    mean and ``geom`` by the geometric mean, which weighs every case by its relative speed-up
    so one large case cannot drown the small ones.
    """
    if not medians_s:
        raise ValueError("no benchmark medians to combine")
    if any(not math.isfinite(m) or m <= 0 for m in medians_s):
        raise ValueError(f"medians must be positive and finite, got {list(medians_s)}")
    if ranking_by == "last":
        return float(medians_s[-1])
    if ranking_by == "mean":
        return math.fsum(medians_s) / len(medians_s)
    if ranking_by == "geom":
        return math.exp(math.fsum(math.log(m) for m in medians_s) / len(medians_s))
    raise ValueError(f"unknown ranking_by {ranking_by!r}; expected one of {', '.join(RANKINGS)}")



def noise_range(ranking_by: str, cases: Sequence[CaseResult]) -> tuple[float | None, float | None]:
    """The score (seconds) computed from every benchmark's interval low, and from every high.

    Each case carries the 95% interval of its median; a re-run's score is expected in this
    range, so two entries whose ranges meet are a tie within noise, not a difference.
    ``(None, None)`` when a case has no interval.
    """
    bounds = [(case.ci_low_ns, case.ci_high_ns) for case in cases]
    if not bounds or any(v is None or not math.isfinite(v) or v <= 0 for pair in bounds for v in pair):
        return None, None
    lows = [float(low or 0.0) * 1e-9 for low, _ in bounds]
    highs = [float(high or 0.0) * 1e-9 for _, high in bounds]
    return combine(ranking_by, lows), combine(ranking_by, highs)


def score(result: Result, ranking_by: str, medians_s: Sequence[float]) -> float:
    """Set ``result``'s score and its noise range from its benchmarks' medians (seconds) and
    return the score; a leaderboard whose ranking cannot take them ends the run with an error."""
    try:
        score_s = combine(ranking_by, medians_s)
    except ValueError as exc:
        raise RunEnded(Status.ERROR, f"cannot score this leaderboard: {exc}") from None
    result.score_s = score_s
    result.score_low_s, result.score_high_s = noise_range(ranking_by, result.benchmarks)
    return score_s
