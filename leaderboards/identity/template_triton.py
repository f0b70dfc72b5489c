#!POPCORN leaderboard identity
"""identity with Triton: copy ``input`` into ``output``.

Contract: ``custom_kernel(data)`` gets ``data = (input, output)``, two float32 tensors of shape
``(size,)`` on the GPU. Write ``output[i] = input[i]`` into the preallocated ``output`` (it is
full of NaN when you get it) and return it.
"""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    n = x.numel()
    copy_kernel[(triton.cdiv(n, 1024),)](x, output, n, BLOCK=1024)
    return output
