#!POPCORN leaderboard vectoradd
"""vectoradd with Triton: ``C = A + B`` for float16 matrices.

Contract: ``custom_kernel(data)`` gets ``data = (A, B, C)``, three contiguous float16 tensors
of shape ``(size, size)`` on the GPU. Write ``A + B`` into the preallocated ``C`` (it is full of
NaN when you get it) and return it.
"""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(c_ptr + offsets, a + b, mask=mask)


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    n = a.numel()
    add_kernel[(triton.cdiv(n, 1024),)](a, b, c, n, BLOCK=1024)
    return c
