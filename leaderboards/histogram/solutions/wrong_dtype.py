#!POPCORN leaderboard histogram
# expect: fail
"""Wrong: returns bincount's int64 counts instead of int32."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    values, bins = data
    return torch.bincount(values.long() * bins // 256, minlength=bins)
