import math

import torch
from task import input_t, output_t
from utils import make_generator, verbose_allclose, verdict


def ref_kernel(data: input_t) -> output_t:
    return data.double().sum().float()


def generate_input(size: int, seed: int, device: str = "cuda") -> input_t:
    """``size`` values ``scale * N(0, 1) + offset``, scale in [0.1, 10), offset in [-100, 100)."""
    gen = make_generator(device, seed)
    scale = 0.1 + 9.9 * torch.rand((), device=device, generator=gen).item()
    offset = -100.0 + 200.0 * torch.rand((), device=device, generator=gen).item()
    x = torch.randn(size, device=device, dtype=torch.float32, generator=gen)
    return x * scale + offset


def tolerance(data: input_t) -> float:
    """Absolute tolerance: a slowly growing fraction of sum(|x|), see the task description."""
    n = data.numel()
    return 1e-5 * max(1.0, math.sqrt(n) / 256) * data.double().abs().sum().item()


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return verdict(verbose_allclose(output, ref_kernel(data), rtol=0.0, atol=tolerance(data)))


def flops(size: int, **_: object) -> float:
    return float(size)


def bytes(size: int, **_: object) -> float:
    return 4.0 * size + 4.0
