#!POPCORN leaderboard conv2d
# expect: fail
"""Wrong: a textbook convolution that flips the kernel; the task (like PyTorch) asks for
cross-correlation."""

import torch
import torch.nn.functional as F
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, w = data
    return F.conv2d(x, torch.flip(w, dims=(2, 3)))
