#!POPCORN leaderboard histogram
# expect: pass
"""torch.bincount on the bin indices."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    values, bins = data
    return torch.bincount(values.long() * bins // 256, minlength=bins).int()
