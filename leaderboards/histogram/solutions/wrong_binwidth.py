#!POPCORN leaderboard histogram
# expect: fail
"""Wrong: divides by 255 instead of 256, so bins are too narrow and 255 falls off the end."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    values, bins = data
    return torch.bincount(values.long() * bins // 255, minlength=bins + 1)[:bins].int()
