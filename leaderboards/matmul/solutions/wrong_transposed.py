#!POPCORN leaderboard matmul
# expect: fail
"""Wrong: multiplies by B's transpose, reading B as if it were stored (n, k)."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b = data
    k, n = b.shape
    return a @ b.reshape(n, k).T
