# expect: pass
"""One launch of a few microseconds: the timer's own noise is what is measured here."""
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    torch.add(a, b, out=out)
    return out
