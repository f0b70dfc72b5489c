from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (A, B, output buffer C)
output_t = torch.Tensor


class TestSpec(TypedDict):
    size: int
    seed: int
