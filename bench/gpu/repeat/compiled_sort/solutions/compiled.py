# expect: pass
"""torch.compile(mode="reduce-overhead") around a sort written into the given output: the
in-place write makes torch skip CUDA graphs, and each call spends hundreds of microseconds of
host time in the compiled wrapper (GPU MODE's sort_v2 solution has this shape)."""
import torch
from task import input_t, output_t


def _sort_into(data: input_t) -> output_t:
    values, out = data
    out[...] = torch.sort(values)[0]
    return out


custom_kernel = torch.compile(_sort_into, mode="reduce-overhead")
