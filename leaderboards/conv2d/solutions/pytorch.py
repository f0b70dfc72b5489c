#!POPCORN leaderboard conv2d
# expect: pass
"""torch.nn.functional.conv2d (cuDNN on the GPU)."""

import torch.nn.functional as F
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, w = data
    return F.conv2d(x, w)
