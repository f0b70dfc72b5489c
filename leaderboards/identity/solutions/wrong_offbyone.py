#!POPCORN leaderboard identity
# expect: fail
"""Wrong: the loop bound is one short, so the last element keeps the harness's NaN."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    n = x.numel()
    output[: n - 1].copy_(x[: n - 1])
    return output
