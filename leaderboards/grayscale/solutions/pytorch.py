#!POPCORN leaderboard grayscale
# expect: pass
"""Three fused-multiply-adds over channel slices, written straight into the buffer.

(Not a matmul with the weight vector: that would follow the global TF32 setting.)
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    rgb, gray = data
    torch.mul(rgb[..., 0], 0.2989, out=gray)
    gray.add_(rgb[..., 1], alpha=0.5870)
    gray.add_(rgb[..., 2], alpha=0.1140)
    return gray
