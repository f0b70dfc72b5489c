#!POPCORN leaderboard vectorsum
"""vectorsum with Triton: the sum of a float32 vector.

Contract: ``custom_kernel(data)`` gets ``data``, a contiguous float32 tensor of shape
``(size,)`` on the GPU, and returns its sum as a 0-dimensional float32 tensor (shape ``()``)
on the same device.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def custom_kernel(data: input_t) -> output_t:
    out = torch.zeros((), device=data.device, dtype=torch.float32)
    n = data.numel()
    sum_kernel[(triton.cdiv(n, 1024),)](data, out, n, BLOCK=1024)
    return out
