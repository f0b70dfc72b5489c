#!POPCORN leaderboard identity
# expect: pass
# requires: cuda
"""Triton copy: 16-byte vector loads, several blocks of 4096 elements per program."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    values = tl.load(x_ptr + offsets, mask=mask, eviction_policy="evict_first")
    tl.store(out_ptr + offsets, values, mask=mask, cache_modifier=".cs")


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    assert x.dtype == torch.float32 and output.dtype == torch.float32
    x = x.contiguous()
    assert output.is_contiguous()
    n = x.numel()
    block = 4096
    copy_kernel[(triton.cdiv(n, block),)](x, output, n, BLOCK=block, num_warps=8)
    return output
