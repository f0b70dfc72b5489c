#!POPCORN leaderboard vectoradd
"""vectoradd: ``C = A + B`` for float16 matrices.

Contract: ``custom_kernel(data)`` gets ``data = (A, B, C)``, three contiguous float16 tensors
of shape ``(size, size)`` on the GPU. Write ``A + B`` into the preallocated ``C`` (it is full of
NaN when you get it) and return it.
"""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    torch.add(a, b, out=c)  # replace with your kernel
    return c
