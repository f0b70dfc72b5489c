import math

import torch
from task import input_t, output_t
from utils import ieee_fp32, make_generator, make_match_reference


def ref_kernel(data: input_t) -> output_t:
    a, b = data
    with ieee_fp32():
        return (a.float() @ b.float()).half()


def generate_input(m: int, n: int, k: int, seed: int, device: str = "cuda") -> input_t:
    """``A`` standard normal ``(m, k)``, ``B`` normal ``(k, n)`` scaled by ``1 / sqrt(k)``."""
    assert m % 128 == 0 and n % 128 == 0 and k % 128 == 0, "sizes must be multiples of 128"
    gen = make_generator(device, seed)
    a = torch.randn(m, k, device=device, generator=gen).half()
    b = (torch.randn(k, n, device=device, generator=gen) / math.sqrt(k)).half()
    return a, b


check_implementation = make_match_reference(ref_kernel, rtol=5e-3, atol=5e-3)


def flops(m: int, n: int, k: int, **_: object) -> float:
    return 2.0 * m * n * k


def bytes(m: int, n: int, k: int, **_: object) -> float:
    return 2.0 * (m * k + k * n + m * n)
