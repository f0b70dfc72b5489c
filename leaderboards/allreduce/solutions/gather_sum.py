#!POPCORN leaderboard allreduce
# expect: pass
"""Correct but slow: gathers every rank's whole vector, then sums them locally."""

import torch
import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    world_size = dist.get_world_size()
    gathered = torch.empty(world_size * data.numel(), dtype=data.dtype, device=data.device)
    dist.all_gather_into_tensor(gathered, data.contiguous())
    return gathered.view(world_size, -1).sum(dim=0)
