#!POPCORN leaderboard histogram
# expect: pass
# requires: cuda
"""Triton: each program builds a private histogram of its slice with tl.histogram, then adds
it to the global counts with one atomic per bin (instead of one per value)."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def histogram_kernel(
    values_ptr,
    counts_ptr,
    n,
    bins,
    BLOCK: tl.constexpr,
    ITERS: tl.constexpr,
    PADDED_BINS: tl.constexpr,
):
    # Masked-off lanes are counted in bin 0 and taken out again at the end.
    base = tl.program_id(0).to(tl.int64) * BLOCK * ITERS
    hist = tl.zeros([PADDED_BINS], dtype=tl.int32)
    dropped = 0
    for i in tl.static_range(ITERS):
        offsets = base + i * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        v = tl.load(values_ptr + offsets, mask=mask, other=0).to(tl.int32)
        hist += tl.histogram(tl.where(mask, v * bins // 256, 0), PADDED_BINS)
        dropped += tl.sum((offsets >= n).to(tl.int32), axis=0)
    b = tl.arange(0, PADDED_BINS)
    hist -= tl.where(b == 0, dropped, 0)
    tl.atomic_add(counts_ptr + b, hist, mask=(b < bins) & (hist > 0), sem="relaxed")


def custom_kernel(data: input_t) -> output_t:
    values, bins = data
    assert values.dtype == torch.uint8 and 1 <= bins <= 256
    values = values.contiguous()
    n = values.numel()
    counts = torch.zeros(bins, device=values.device, dtype=torch.int32)
    if n == 0:
        return counts
    block, iters = 4096, 8
    padded_bins = max(16, triton.next_power_of_2(bins))
    grid = (triton.cdiv(n, block * iters),)
    histogram_kernel[grid](values, counts, n, bins, BLOCK=block, ITERS=iters, PADDED_BINS=padded_bins, num_warps=8)
    return counts
