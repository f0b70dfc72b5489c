#!POPCORN leaderboard identity
# expect: pass
"""The obvious PyTorch copy."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output.copy_(x)
    return output
