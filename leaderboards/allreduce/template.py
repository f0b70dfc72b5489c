#!POPCORN leaderboard allreduce
"""allreduce: the element-wise sum of every rank's float32 vector, on every rank.

Contract: ``custom_kernel(data)`` runs on every rank at once, ``torch.distributed`` already
initialized; ``data`` is this rank's float32 tensor of shape ``(size,)`` on its device. Return
the sum over all ranks, float32, same shape and device (``data`` may be overwritten).
"""

import torch.distributed as dist
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    dist.all_reduce(data)  # replace with your kernel
    return data
