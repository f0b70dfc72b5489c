"""Statistics of timed runs: summaries, the confidence interval of the median, when to stop.

Pure arithmetic on nanosecond samples, shared by the Python and CUDA paths, so the rule that
decides how long a case is timed lives in one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kernelcup.harness.spec import CaseResult

Z_95 = 1.959964
RANKED_ROUNDS = 3  # why three: harness/benchmark.py, where it is used


@dataclass(frozen=True)
class Summary:
    runs: int
    median: float
    mean: float
    min: float
    max: float
    std: float
    ci_low: float
    ci_high: float

    @property
    def relative_ci_width(self) -> float:
        return (self.ci_high - self.ci_low) / self.median if self.median > 0 else math.inf


@dataclass(frozen=True)
class StopRule:
    """When a case has been timed enough: the median's interval is tight, or a limit is hit."""

    min_runs: int = 10
    max_runs: int = 10_000
    max_seconds: float = 1.0
    rel_ci_width: float = 0.02  # full width of the 95% interval of the median, relative
    abs_ci_width_ns: float = 0.0  # ...or at most this wide: what the clock can resolve


def median(sorted_samples: Sequence[float]) -> float:
    n = len(sorted_samples)
    if n == 0:
        raise ValueError("no samples")
    mid = n // 2
    if n % 2:
        return float(sorted_samples[mid])
    return (sorted_samples[mid - 1] + sorted_samples[mid]) / 2.0


def median_interval(sorted_samples: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% interval of the median from order statistics.

    Timing samples are skewed (a slow tail, never a fast one), so an interval that assumes
    nothing about the distribution is the honest one. With ranks ``n/2 ± z·√n/2`` (the normal
    approximation to the binomial), clipped to the sample.
    """
    n = len(sorted_samples)
    if n == 0:
        raise ValueError("no samples")
    half = Z_95 * math.sqrt(n) / 2.0
    low_rank = max(1, math.floor(n / 2.0 - half))  # 1-based ranks
    high_rank = min(n, math.ceil(1 + n / 2.0 + half))
    return float(sorted_samples[low_rank - 1]), float(sorted_samples[high_rank - 1])


def mean(samples: Sequence[float]) -> float:
    return math.fsum(samples) / len(samples)


def std(samples: Sequence[float]) -> float:
    """The sample standard deviation; 0 below two samples."""
    n = len(samples)
    if n < 2:
        return 0.0
    centre = mean(samples)
    return math.sqrt(math.fsum((x - centre) ** 2 for x in samples) / (n - 1))


def mean_error(samples: Sequence[float]) -> float:
    """Standard error of the mean; 0 below two samples."""
    return std(samples) / math.sqrt(len(samples)) if len(samples) > 1 else 0.0


def summarize(samples: Sequence[float]) -> Summary:
    ordered = sorted(samples)
    n = len(ordered)
    if n == 0:
        raise ValueError("no samples")
    low, high = median_interval(ordered)
    return Summary(
        runs=n,
        median=median(ordered),
        mean=mean(ordered),
        min=float(ordered[0]),
        max=float(ordered[-1]),
        std=std(ordered),
        ci_low=low,
        ci_high=high,
    )


def should_stop(samples: Sequence[float], elapsed_s: float, rule: StopRule) -> bool:
    n = len(samples)
    if n >= rule.max_runs or (elapsed_s >= rule.max_seconds and n >= 2):
        return True
    if n < rule.min_runs:
        return False
    summary = summarize(samples)
    return summary.ci_high - summary.ci_low <= rule.abs_ci_width_ns or summary.relative_ci_width <= rule.rel_ci_width


def case_result(case: dict[str, Any], summary: Summary, message: str = "") -> CaseResult:
    """A passing benchmark case with these statistics (roofline figures are added later)."""
    return CaseResult(
        case=case,
        passed=True,
        message=message,
        runs=summary.runs,
        median_ns=summary.median,
        mean_ns=summary.mean,
        min_ns=summary.min,
        max_ns=summary.max,
        std_ns=summary.std,
        ci_low_ns=summary.ci_low,
        ci_high_ns=summary.ci_high,
    )
