# expect: pass
"""torch.bincount: it reads the largest value back to the host to size its output (a sync)."""
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    values, out = data
    out.copy_(torch.bincount(values, minlength=out.numel()))
    return out
