#!POPCORN leaderboard conv2d
# expect: fail
"""Wrong: "same" padding, so the output is as large as the input."""

import torch.nn.functional as F
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, w = data
    return F.conv2d(x, w, padding="same")
