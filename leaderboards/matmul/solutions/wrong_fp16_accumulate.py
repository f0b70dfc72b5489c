#!POPCORN leaderboard matmul
# expect: fail
"""Wrong: accumulates in float16, one rank-1 update at a time, so rounding errors pile up
(about 2e-2 on unit-sized outputs at k = 512)."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    c = torch.zeros(a.shape[0], b.shape[1], device=a.device, dtype=torch.float16)
    for i in range(a.shape[1]):
        c += (a[:, i : i + 1].float() * b[i : i + 1].float()).half()
    return c
