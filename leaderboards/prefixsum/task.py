from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # (input, output buffer)
output_t = torch.Tensor


class TestSpec(TypedDict):
    size: int
    seed: int
