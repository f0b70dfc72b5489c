from typing import TypedDict

import torch

input_t = tuple[torch.Tensor, torch.Tensor]  # (x NCHW, w FCKK)
output_t = torch.Tensor


class TestSpec(TypedDict):
    batch: int
    channels: int
    filters: int
    height: int
    width: int
    kernelsize: int
    dtype: str  # "float32" or "float16"
    seed: int
