#!POPCORN leaderboard prefixsum
# expect: fail
"""Wrong: an exclusive scan (output[i] = input[0] + ... + input[i - 1])."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output[0] = 0.0
    torch.cumsum(x[:-1], dim=0, out=output[1:])
    return output
