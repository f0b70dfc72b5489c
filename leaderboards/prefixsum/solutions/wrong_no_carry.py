#!POPCORN leaderboard prefixsum
# expect: fail
"""Wrong: scans blocks of 1024 independently and forgets to add the earlier blocks' sums."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    for start in range(0, x.numel(), 1024):
        torch.cumsum(x[start : start + 1024], dim=0, out=output[start : start + 1024])
    return output
