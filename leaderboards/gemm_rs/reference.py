import math

import torch
import torch.distributed as dist
from task import input_t, output_t
from utils import ieee_fp32, make_generator, verbose_allclose, verdict


def generate_input(rank: int, world_size: int, m: int, n: int, k: int, seed: int, device: str = "cuda") -> input_t:
    """This rank's K-slices of A (m, k) and B (n, k), N(0, 1) / 8 in bfloat16."""
    if m % world_size or k % world_size:
        raise ValueError(f"m ({m}) and k ({k}) must be multiples of world_size ({world_size})")
    gen = make_generator(device, seed * 64 + rank)
    local_k = k // world_size
    a = (torch.randn((m, local_k), device=device, generator=gen) / 8).to(torch.bfloat16)
    b = (torch.randn((n, local_k), device=device, generator=gen) / 8).to(torch.bfloat16)
    return a, b


def ref_kernel(data: input_t) -> output_t:
    """float32 product, float32 reduce-scatter, rounded to bfloat16 (collective)."""
    a, b = data
    with ieee_fp32():
        partial = a.float() @ b.float().T
    rows = partial.shape[0] // dist.get_world_size()
    out = torch.empty((rows, partial.shape[1]), dtype=torch.float32, device=partial.device)
    dist.reduce_scatter_tensor(out, partial.contiguous())
    return out.to(torch.bfloat16)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    expected = ref_kernel(data)
    k = data[0].shape[1] * dist.get_world_size()
    return verdict(verbose_allclose(output, expected, rtol=2e-2, atol=2e-2 * math.sqrt(k) / 64))


def flops(world_size: int, m: int, n: int, k: int, **_: object) -> float:
    """Per rank: its slice of the product."""
    return 2.0 * m * n * k / world_size


def bytes(world_size: int, m: int, n: int, k: int, **_: object) -> float:
    """Per rank: its slices of A and B read, its share of the reduced product written."""
    return 2.0 * (m + n) * k / world_size + 2.0 * m * n / world_size
