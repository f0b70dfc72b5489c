#!POPCORN leaderboard allreduce
# expect: fail
"""Wrong: assumes every rank holds the same vector and scales its own instead of reducing."""

import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return data * dist.get_world_size()
