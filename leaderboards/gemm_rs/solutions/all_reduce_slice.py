#!POPCORN leaderboard gemm_rs
# expect: pass
"""Correct but slow: reduces the whole product on every rank, then keeps its own rows
(world_size times the traffic of a reduce-scatter)."""

import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    partial = a @ b.T
    dist.all_reduce(partial)
    rows = partial.shape[0] // dist.get_world_size()
    start = dist.get_rank() * rows
    return partial[start : start + rows].contiguous()
