# expect: pass
"""index_add_: float atomics, nine in ten of them on one bin."""
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    index, values, out = data
    out.zero_()
    out.index_add_(0, index, values)
    return out
