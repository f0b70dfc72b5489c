#!POPCORN leaderboard allreduce
# expect: pass
"""Fast: one in-place all_reduce (NCCL's ring or tree), no extra copy."""

import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    dist.all_reduce(data, op=dist.ReduceOp.SUM)
    return data
