#!POPCORN leaderboard softmax
# expect: fail
"""Wrong: normalises over the columns (dim 0) instead of the rows."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output.copy_(torch.softmax(x.float(), dim=0))
    return output
