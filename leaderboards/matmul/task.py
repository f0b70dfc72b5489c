from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # (A, B)
output_t = torch.Tensor


class TestSpec(TypedDict):
    m: int
    n: int
    k: int
    seed: int
