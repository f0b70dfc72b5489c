#!POPCORN leaderboard vectorsum
# expect: fail
"""Wrong: the right number, but returned as shape (1,) instead of a 0-dimensional tensor."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    return data.sum().reshape(1)
