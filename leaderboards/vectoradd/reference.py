import torch
from task import input_t, output_t
from utils import make_generator, make_match_reference


def ref_kernel(data: input_t) -> output_t:
    a, b, _ = data
    return (a.float() + b.float()).half()


def generate_input(size: int, seed: int, device: str = "cuda") -> input_t:
    """Two ``(size, size)`` standard normal float16 matrices and an output buffer."""
    gen = make_generator(device, seed)
    a = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen)
    b = torch.randn(size, size, device=device, dtype=torch.float16, generator=gen)
    return a, b, torch.empty_like(a)


check_implementation = make_match_reference(ref_kernel, rtol=1e-3, atol=1e-3)


def flops(size: int, **_: object) -> float:
    return float(size * size)


def bytes(size: int, **_: object) -> float:
    return 3.0 * 2 * size * size
