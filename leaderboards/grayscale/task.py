from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # (rgb image, output buffer)
output_t = torch.Tensor


class TestSpec(TypedDict):
    height: int
    width: int
    seed: int
