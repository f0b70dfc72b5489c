from typing import TypedDict

import torch

input_t = torch.Tensor  # this rank's float32 vector
output_t = torch.Tensor  # the sum over all ranks, float32, same shape and device


class TestSpec(TypedDict):
    world_size: int
    size: int
    seed: int
