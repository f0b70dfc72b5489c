from typing import TypedDict

import torch

input_t = torch.Tensor
output_t = torch.Tensor  # 0-dimensional float32


class TestSpec(TypedDict):
    size: int
    seed: int
