#!POPCORN leaderboard prefixsum
"""prefixsum with Triton: inclusive scan of a float32 vector.

Contract: ``custom_kernel(data)`` gets ``data = (input, output)``, two contiguous float32
tensors of shape ``(size,)`` on the GPU. Write ``output[i] = input[0] + ... + input[i]`` into
the preallocated ``output`` (it is full of NaN when you get it) and return it.

This starting point scans in one program, which is correct but uses a single SM: split the
work into blocks and propagate their sums to go fast.
"""

import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def scan_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    carry = 0.0
    for start in range(0, n, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
        scanned = tl.cumsum(x, axis=0) + carry
        tl.store(out_ptr + offsets, scanned, mask=mask)
        carry += tl.sum(x, axis=0)


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    scan_kernel[(1,)](x, output, x.numel(), BLOCK=1024)
    return output
