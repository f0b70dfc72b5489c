#!POPCORN leaderboard prefixsum
# expect: pass
"""torch.cumsum into the output buffer."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    torch.cumsum(x, dim=0, out=output)
    return output
