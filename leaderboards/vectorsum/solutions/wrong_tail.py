#!POPCORN leaderboard vectorsum
# expect: fail
"""Wrong: sums whole blocks of 256 only and forgets the tail when size is not a multiple."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    whole = data.numel() // 256 * 256
    return data[:whole].view(-1, 256).sum(dim=1).sum() if whole else torch.zeros_like(data[0])
