#!POPCORN leaderboard identity
"""identity: copy ``input`` into ``output``.

Contract: ``custom_kernel(data)`` gets ``data = (input, output)``, two float32 tensors of shape
``(size,)`` on the GPU. Write ``output[i] = input[i]`` into the preallocated ``output`` (it is
full of NaN when you get it) and return it.
"""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output.copy_(x)  # replace with your kernel
    return output
