from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, int]  # (uint8 values, number of bins)
output_t = torch.Tensor  # int32 counts, shape (bins,)


class TestSpec(TypedDict):
    size: int
    bins: int
    contention: int
    seed: int
