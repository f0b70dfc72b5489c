#!POPCORN leaderboard gemm_rs
# expect: fail
"""Wrong: keeps its own rows of its own partial product and never sums over the ranks."""

import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    rows = a.shape[0] // dist.get_world_size()
    start = dist.get_rank() * rows
    return (a[start : start + rows] @ b.T).contiguous()
