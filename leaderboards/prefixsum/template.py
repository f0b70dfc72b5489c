#!POPCORN leaderboard prefixsum
"""prefixsum: inclusive scan of a float32 vector.

Contract: ``custom_kernel(data)`` gets ``data = (input, output)``, two contiguous float32
tensors of shape ``(size,)`` on the GPU. Write ``output[i] = input[0] + ... + input[i]`` into
the preallocated ``output`` (it is full of NaN when you get it) and return it.
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    torch.cumsum(x, dim=0, out=output)  # replace with your kernel
    return output
