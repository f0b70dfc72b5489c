"""Work per case for the harness's GB/s, % of peak and physical floor (a kernelcup extension).

This leaderboard's reference is CUDA (``reference.cuh``); this file only tells the harness how
much work a case is. It needs nothing beyond the standard library and is never compiled.
"""


def flops(size: int, **_: object) -> float:
    return float(size)  # one addition per element


def bytes(size: int, **_: object) -> float:
    return 3.0 * 2 * size  # read a and b, write c: float16 each
