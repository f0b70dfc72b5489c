#!POPCORN leaderboard gemm_rs
# expect: pass
"""Fast: one GEMM, then reduce_scatter_tensor straight into this rank's block."""

import torch
import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    partial = torch.mm(a, b.T)
    out = torch.empty((a.shape[0] // dist.get_world_size(), b.shape[0]), dtype=a.dtype, device=a.device)
    dist.reduce_scatter_tensor(out, partial)
    return out
