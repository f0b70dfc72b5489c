"""The figures of a back-to-back pair of ranked runs (issue #14), for run_all.py's
repeatability table and gpumode_compat.py's ``--twice``: whether every case agrees within
max(1%, 0.2 µs), and whether the two scores' noise ranges meet (the ranking's tie)."""

from __future__ import annotations

from kernelcup.harness.spec import Result


def ranges_overlap(first: Result, second: Result) -> bool | str:
    """Whether the two scores' noise ranges overlap, which the ranking shows as a tie."""
    lows = [r.score_low_s for r in (first, second) if r.score_low_s is not None]
    highs = [r.score_high_s for r in (first, second) if r.score_high_s is not None]
    if len(lows) < 2 or len(highs) < 2:
        return "no range"
    return max(lows) <= min(highs)


def cases_repeat(first: Result, second: Result) -> tuple[bool, str]:
    """Whether every case's two medians agree within max(1%, 0.2 µs), and the worst case's gap."""
    ok, worst, worst_text = True, -1.0, ""
    for one, two in zip(first.benchmarks, second.benchmarks, strict=True):
        a, b = one.median_ns or 0.0, two.median_ns or 0.0
        gap = abs(a - b)
        allowed = max(0.01 * min(a, b), 200.0)
        ok = ok and gap <= allowed
        if gap / allowed > worst:
            worst, worst_text = gap / allowed, f"{a / 1e3:.2f} vs {b / 1e3:.2f} µs"
    return ok, worst_text
