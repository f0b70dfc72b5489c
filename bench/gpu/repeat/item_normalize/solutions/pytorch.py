# expect: pass
"""The scale goes through the host with .item(): a sync in the middle of the call."""
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, out = data
    scale = x.abs().max().item()
    torch.div(x, scale, out=out)
    return out
