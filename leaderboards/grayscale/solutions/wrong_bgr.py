#!POPCORN leaderboard grayscale
# expect: fail
"""Wrong: reads the image as BGR (OpenCV's order), so R and B get each other's weights."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    rgb, gray = data
    gray.copy_(0.1140 * rgb[..., 0] + 0.5870 * rgb[..., 1] + 0.2989 * rgb[..., 2])
    return gray
