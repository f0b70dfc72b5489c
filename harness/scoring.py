"""The one place that turns per-case medians into a leaderboard score.

The core imports :func:`combine` to rank stored results; the harness uses it for
``Result.score_s``. Scores are in seconds and lower is better.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
