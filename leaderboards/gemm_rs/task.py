from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # a (m, k / world_size), b (n, k / world_size), bfloat16
output_t = torch.Tensor  # (m / world_size, n) bfloat16: this rank's rows of the reduced product


class TestSpec(TypedDict):
    world_size: int
    m: int
    n: int
    k: int
    seed: int
