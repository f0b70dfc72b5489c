#!POPCORN leaderboard softmax
# expect: fail
"""Wrong: the textbook formula without subtracting the row maximum; exp overflows to inf and
inf / inf gives NaN on rows offset by more than ~80."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    e = torch.exp(x.float())
    output.copy_(e / e.sum(dim=-1, keepdim=True))
    return output
