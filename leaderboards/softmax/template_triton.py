#!POPCORN leaderboard softmax
"""softmax with Triton: row-wise softmax along the last dimension.

Contract: ``custom_kernel(data)`` gets ``data = (x, output)``: two contiguous tensors of shape
``(rows, cols)`` and the same dtype (float32 or float16) on the GPU. Write
``softmax(x, dim=-1)`` into the preallocated ``output`` (it is full of NaN when you get it) and
return it. Compute in float32 internally, and subtract the row maximum: rows are offset by up
to 100, so exp(x) alone overflows.

This starting point keeps a whole row in one block, so it only works while ``cols`` is small
enough for the registers (the tests go up to 20000 columns, the benchmarks to 32768).
"""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def softmax_kernel(x_ptr, out_ptr, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    mask = offsets < cols
    x = tl.load(x_ptr + row * cols + offsets, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    y = e / tl.sum(e, axis=0)
    tl.store(out_ptr + row * cols + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    rows, cols = x.shape
    softmax_kernel[(rows,)](x, output, cols, BLOCK=triton.next_power_of_2(cols))
    return output
