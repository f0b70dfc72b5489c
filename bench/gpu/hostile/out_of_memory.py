# Asks for 64 TiB of GPU memory.
import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    torch.empty(1 << 46, dtype=torch.uint8, device="cuda")
    return data[-1]
