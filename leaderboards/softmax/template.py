#!POPCORN leaderboard softmax
"""softmax: row-wise softmax along the last dimension.

Contract: ``custom_kernel(data)`` gets ``data = (x, output)``: two contiguous tensors of shape
``(rows, cols)`` and the same dtype (float32 or float16) on the GPU. Write
``softmax(x, dim=-1)`` into the preallocated ``output`` (it is full of NaN when you get it) and
return it. Compute in float32 internally, and subtract the row maximum: rows are offset by up
to 100, so exp(x) alone overflows.
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output.copy_(torch.softmax(x.float(), dim=-1))  # replace with your kernel
    return output
