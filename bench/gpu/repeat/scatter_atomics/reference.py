import torch
from task import input_t, output_t

BINS = 64


def generate_input(size: int, seed: int, device: str = "cuda") -> input_t:
    gen = torch.Generator(device=device).manual_seed(seed)
    index = torch.randint(0, BINS, (size,), device=device, generator=gen)
    index[torch.rand(size, device=device, generator=gen) < 0.9] = 7
    values = torch.rand(size, device=device, generator=gen)
    return index, values, torch.empty(BINS, device=device)


def ref_kernel(data: input_t) -> output_t:
    index, values, _ = data
    return torch.zeros(BINS, dtype=torch.float64, device=values.device).index_add_(0, index, values.double())


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    # Float atomics add in any order: compare with a float64 sum, relative to its size. The
    # 16M case puts ~15M float32 adds on bin 7 (sum ~7.5M, steps of 0.5 there): their rounding
    # wanders ~550 (7e-5), so 1e-4 failed an honest run on an H100; 1e-3 is ~14 of those.
    if not torch.allclose(output.double(), ref_kernel(data), rtol=1e-3, atol=1e-3):
        return False, "mismatch"
    return True, ""
