import torch
from task import input_t, output_t


def generate_input(size: int, seed: int, device: str = "cuda") -> input_t:
    gen = torch.Generator(device=device).manual_seed(seed)
    a, b, c = (torch.randn(size, device=device, generator=gen) for _ in range(3))
    return a, b, c, torch.empty(size, device=device)


def ref_kernel(data: input_t) -> output_t:
    a, b, c, _ = data
    return (torch.relu(2 * a + b) - c).abs()


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    if not torch.allclose(output, ref_kernel(data), rtol=1e-5, atol=1e-6):
        return False, "mismatch"
    return True, ""
