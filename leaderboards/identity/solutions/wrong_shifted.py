#!POPCORN leaderboard identity
# expect: fail
"""Wrong: writes the copy one element late (output[i] = input[i - 1])."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output.copy_(torch.roll(x, 1))
    return output
