#!POPCORN leaderboard vectorsum
# expect: pass
# requires: cuda
"""Triton, two passes and no atomics (so the result is deterministic).

Pass 1: each program sums 16384 elements into one partial. Pass 2: one program sums the
partials.
"""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def partial_sum_kernel(x_ptr, partial_ptr, n, BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * BLOCK * ITERS
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for i in tl.static_range(ITERS):
        offsets = base + i * BLOCK + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + offsets, mask=offsets < n, other=0.0, eviction_policy="evict_first")
    tl.store(partial_ptr + pid, tl.sum(acc, axis=0))


@triton.jit
def final_sum_kernel(partial_ptr, out_ptr, m, BLOCK: tl.constexpr):
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, m, BLOCK):
        offsets = start + tl.arange(0, BLOCK)
        acc += tl.load(partial_ptr + offsets, mask=offsets < m, other=0.0)
    tl.store(out_ptr, tl.sum(acc, axis=0))


def custom_kernel(data: input_t) -> output_t:
    assert data.dtype == torch.float32
    x = data.contiguous()
    n = x.numel()
    block, iters = 4096, 4
    programs = max(1, triton.cdiv(n, block * iters))
    partials = torch.empty(programs, device=x.device, dtype=torch.float32)
    out = torch.empty((), device=x.device, dtype=torch.float32)
    partial_sum_kernel[(programs,)](x, partials, n, BLOCK=block, ITERS=iters, num_warps=8)
    final_sum_kernel[(1,)](partials, out, programs, BLOCK=1024, num_warps=4)
    return out
