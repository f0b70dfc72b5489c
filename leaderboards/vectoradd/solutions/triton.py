#!POPCORN leaderboard vectoradd
# expect: pass
# requires: cuda
"""Triton add over the flattened matrices, 8192 halves per program."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def add_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask, eviction_policy="evict_first")
    b = tl.load(b_ptr + offsets, mask=mask, eviction_policy="evict_first")
    tl.store(c_ptr + offsets, a + b, mask=mask, cache_modifier=".cs")


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    assert a.dtype == b.dtype == c.dtype == torch.float16
    a, b = a.contiguous(), b.contiguous()
    assert c.is_contiguous()
    n = a.numel()
    block = 8192
    add_kernel[(triton.cdiv(n, block),)](a, b, c, n, BLOCK=block, num_warps=8)
    return c
