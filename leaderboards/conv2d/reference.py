import math

import torch
import torch.nn.functional as F
from task import input_t, output_t
from utils import ieee_fp32, make_generator, make_match_reference

DTYPES = {"float32": torch.float32, "float16": torch.float16}


def ref_kernel(data: input_t) -> output_t:
    x, w = data
    with ieee_fp32():
        return F.conv2d(x.float(), w.float()).to(x.dtype)


def generate_input(
    batch: int,
    channels: int,
    filters: int,
    height: int,
    width: int,
    kernelsize: int,
    dtype: str,
    seed: int,
    device: str = "cuda",
) -> input_t:
    """Standard normal ``x``; ``w`` scaled by ``1 / sqrt(channels * kernelsize^2)``."""
    assert kernelsize <= min(height, width), "the kernel must fit in the image"
    gen = make_generator(device, seed)
    x = torch.randn(batch, channels, height, width, device=device, generator=gen)
    w = torch.randn(filters, channels, kernelsize, kernelsize, device=device, generator=gen)
    w /= math.sqrt(channels * kernelsize * kernelsize)
    return x.to(DTYPES[dtype]), w.to(DTYPES[dtype])


check_implementation = make_match_reference(ref_kernel, rtol=1e-2, atol=1e-2)


def _output_elements(batch: int, filters: int, height: int, width: int, kernelsize: int) -> int:
    return batch * filters * (height - kernelsize + 1) * (width - kernelsize + 1)


def flops(
    batch: int,
    channels: int,
    filters: int,
    height: int,
    width: int,
    kernelsize: int,
    **_: object,
) -> float:
    outputs = _output_elements(batch, filters, height, width, kernelsize)
    return 2.0 * outputs * channels * kernelsize * kernelsize


def bytes(
    batch: int,
    channels: int,
    filters: int,
    height: int,
    width: int,
    kernelsize: int,
    dtype: str,
    **_: object,
) -> float:
    elements = (
        batch * channels * height * width
        + filters * channels * kernelsize * kernelsize
        + _output_elements(batch, filters, height, width, kernelsize)
    )
    return float(DTYPES[dtype].itemsize * elements)
