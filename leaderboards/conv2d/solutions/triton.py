#!POPCORN leaderboard conv2d
# expect: pass
# requires: cuda
"""Triton implicit GEMM: the convolution as a (batch*OH*OW) x (channels*k*k) times
(channels*k*k) x filters matrix product, with the input patches gathered on the fly (no
im2col buffer) and tl.dot accumulating in float32 (TF32 for float32 inputs, as allowed)."""

import torch
import triton
import triton.language as tl
from task import input_t, output_t


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32}, num_stages=3, num_warps=4),
        triton.Config({"BLOCK_M": 256, "BLOCK_N": 64, "BLOCK_K": 32}, num_stages=3, num_warps=8),
        triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 32}, num_stages=3, num_warps=8),
    ],
    key=["C", "H", "W", "F", "KS", "M"],
)
@triton.jit
def conv_gemm_kernel(
    x_ptr,
    w_ptr,
    out_ptr,
    C,
    H,
    W,
    F,
    OH,
    OW,
    M,
    KS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    # Row m of the GEMM is output pixel (b, i, j); column n is filter f; the reduction index
    # r = (c, p, q) walks the k*k window of every channel.
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_mask = rm < M
    n_mask = rn < F
    pixels = OH * OW
    b = rm // pixels
    ij = rm % pixels
    i = ij // OW
    j = ij % OW
    x_row = b * C * H * W + i * W + j  # offset of x[b, 0, i, j]

    R = C * KS * KS
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r0 in range(0, R, BLOCK_K):
        r = r0 + tl.arange(0, BLOCK_K)
        r_mask = r < R
        c = r // (KS * KS)
        pq = r % (KS * KS)
        x_col = c * H * W + (pq // KS) * W + (pq % KS)
        a = tl.load(
            x_ptr + x_row[:, None] + x_col[None, :],
            mask=m_mask[:, None] & r_mask[None, :],
            other=0.0,
        )
        wt = tl.load(w_ptr + rn[None, :] * R + r[:, None], mask=r_mask[:, None] & n_mask[None, :], other=0.0)
        acc = tl.dot(a, wt, acc)

    out_offsets = (b * F * pixels + ij)[:, None] + rn[None, :] * pixels
    tl.store(
        out_ptr + out_offsets,
        acc.to(out_ptr.dtype.element_ty),
        mask=m_mask[:, None] & n_mask[None, :],
    )


def custom_kernel(data: input_t) -> output_t:
    x, w = data
    assert x.dtype == w.dtype and x.dtype in (torch.float16, torch.float32)
    x, w = x.contiguous(), w.contiguous()
    batch, channels, height, width = x.shape
    filters, channels_w, ks, ks2 = w.shape
    assert channels == channels_w and ks == ks2
    oh, ow = height - ks + 1, width - ks + 1
    out = torch.empty(batch, filters, oh, ow, device=x.device, dtype=x.dtype)
    # 32-bit offsets inside the kernel.
    assert max(x.numel(), out.numel()) < 2**31
    m = batch * oh * ow

    def grid(meta):
        return (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(filters, meta["BLOCK_N"]))

    conv_gemm_kernel[grid](x, w, out, channels, height, width, filters, oh, ow, m, KS=ks)
    return out
