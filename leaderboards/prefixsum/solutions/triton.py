#!POPCORN leaderboard prefixsum
# expect: pass
# requires: cuda
"""Triton scan-then-propagate in three launches:

1. each program sums one block of 4096 elements;
2. one program turns the block sums into exclusive block offsets;
3. each program scans its block again and adds its offset.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def block_sum_kernel(x_ptr, sums_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.store(sums_ptr + pid, tl.sum(x, axis=0))


@triton.jit
def block_offset_kernel(sums_ptr, m, BLOCK: tl.constexpr):
    # In place: sums[i] becomes sums[0] + ... + sums[i - 1].
    carry = 0.0
    for start in range(0, m, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        mask = offsets < m
        s = tl.load(sums_ptr + offsets, mask=mask, other=0.0)
        inclusive = tl.cumsum(s, axis=0)
        tl.store(sums_ptr + offsets, inclusive - s + carry, mask=mask)
        carry += tl.sum(s, axis=0)


@triton.jit
def block_scan_kernel(x_ptr, sums_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0, eviction_policy="evict_first")
    scanned = tl.cumsum(x, axis=0) + tl.load(sums_ptr + pid)
    tl.store(out_ptr + offsets, scanned, mask=mask, cache_modifier=".cs")


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    assert x.dtype == output.dtype == torch.float32
    x = x.contiguous()
    assert output.is_contiguous()
    n = x.numel()
    if n == 0:
        return output
    block = 4096
    blocks = triton.cdiv(n, block)
    sums = torch.empty(blocks, device=x.device, dtype=torch.float32)
    block_sum_kernel[(blocks,)](x, sums, n, BLOCK=block, num_warps=8)
    block_offset_kernel[(1,)](sums, blocks, BLOCK=4096, num_warps=8)
    block_scan_kernel[(blocks,)](x, sums, output, n, BLOCK=block, num_warps=8)
    return output
