#!POPCORN leaderboard vectorsum
"""vectorsum: the sum of a float32 vector.

Contract: ``custom_kernel(data)`` gets ``data``, a contiguous float32 tensor of shape
``(size,)`` on the GPU, and returns its sum as a 0-dimensional float32 tensor (shape ``()``)
on the same device.
"""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return data.sum()  # replace with your kernel
