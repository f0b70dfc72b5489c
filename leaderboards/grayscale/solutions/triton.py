#!POPCORN leaderboard grayscale
# expect: pass
# requires: cuda
"""Triton: each program loads a [BLOCK, 4] tile of pixels (channel 3 masked off), so the
interleaved RGB stream is read with contiguous, coalesced accesses."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.jit
def grayscale_kernel(rgb_ptr, gray_ptr, pixels, BLOCK: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    c = tl.arange(0, 4)
    pixel_mask = p < pixels
    mask = pixel_mask[:, None] & (c < 3)[None, :]
    rgb = tl.load(rgb_ptr + 3 * p[:, None] + c[None, :], mask=mask, other=0.0, eviction_policy="evict_first")
    weights = tl.where(c == 0, 0.2989, tl.where(c == 1, 0.5870, tl.where(c == 2, 0.1140, 0.0)))
    gray = tl.sum(rgb * weights[None, :], axis=1)
    tl.store(gray_ptr + p, gray, mask=pixel_mask, cache_modifier=".cs")


def custom_kernel(data: input_t) -> output_t:
    rgb, gray = data
    assert rgb.dtype == gray.dtype == torch.float32 and rgb.shape[-1] == 3
    rgb = rgb.contiguous()
    assert gray.is_contiguous()
    pixels = gray.numel()
    block = 2048
    grayscale_kernel[(triton.cdiv(pixels, block),)](rgb, gray, pixels, BLOCK=block, num_warps=8)
    return gray
