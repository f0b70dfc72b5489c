#!POPCORN leaderboard softmax
# expect: pass
"""torch.softmax, in float32 for float16 inputs, written into the buffer."""

import torch
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    if x.dtype == torch.float32:
        torch.softmax(x, dim=-1, out=output)
    else:
        output.copy_(torch.softmax(x, dim=-1, dtype=torch.float32))
    return output
