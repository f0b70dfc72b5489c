#!POPCORN leaderboard vectoradd
# expect: fail
"""Wrong: the last row is never written, so it keeps the harness's NaN."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    rows = a.shape[0]
    torch.add(a[: rows - 1], b[: rows - 1], out=c[: rows - 1])
    return c
