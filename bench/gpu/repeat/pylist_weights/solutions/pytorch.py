# expect: pass
"""The weights come from a Python list every call: a host-to-device copy inside the call."""
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    rgb, out = data
    weights = torch.tensor([0.2989, 0.587, 0.114], device=rgb.device)
    torch.sum(rgb * weights, dim=-1, out=out)
    return out
