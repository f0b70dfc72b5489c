from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # (x, output buffer)
output_t = torch.Tensor


class TestSpec(TypedDict):
    rows: int
    cols: int
    dtype: str  # "float32" or "float16"
    seed: int
