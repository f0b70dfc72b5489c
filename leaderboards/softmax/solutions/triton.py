#!POPCORN leaderboard softmax
# expect: pass
# requires: cuda
"""Triton, one program per row, float32 math.

Rows up to 32768 columns are held in registers (one read, one write: no reliance on L2 keeping
a row between passes). Longer rows take two passes: an online max-and-sum over chunks, then a
second read that writes the output.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t

MAX_SINGLE_BLOCK = 32768


@triton.jit
def softmax_row_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(
        tl.float32
    )
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * cols + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_online_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * cols
    out_row = out_ptr + row * cols
    # Pass 1: running maximum and the sum of exp(x - maximum), rescaled as the maximum grows.
    # The first chunk always holds a real value, so m is finite from then on.
    m = -float("inf")
    s = 0.0
    for start in range(0, cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offsets, mask=offsets < cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    inv = 1.0 / s
    # Pass 2: normalise and write.
    for start in range(0, cols, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < cols
        x = tl.load(x_row + offsets, mask=mask, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
        y = tl.exp(x - m) * inv
        tl.store(out_row + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    assert x.dtype in (torch.float32, torch.float16) and output.dtype == x.dtype
    x = x.contiguous()
    assert output.is_contiguous() and x.dim() == 2
    rows, cols = x.shape
    if cols <= MAX_SINGLE_BLOCK:
        block = triton.next_power_of_2(cols)
        warps = 4 if block <= 1024 else (8 if block <= 4096 else (16 if block <= 8192 else 32))
        softmax_row_kernel[(rows,)](x, output, cols, BLOCK=block, num_warps=warps)
    else:
        softmax_online_kernel[(rows,)](x, output, cols, BLOCK=4096, num_warps=8)
    return output
