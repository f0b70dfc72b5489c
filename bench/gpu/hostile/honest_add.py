# vectoradd done plainly, on the current stream: the baseline for the cheats next to it.
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data
    for _ in range(4):  # enough work to be measured well above the timer's noise
        torch.add(a, b, out=c)
    return c
