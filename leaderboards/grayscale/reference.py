import torch
from task import input_t, output_t
from utils import make_generator, make_match_reference

WEIGHTS = (0.2989, 0.5870, 0.1140)


def ref_kernel(data: input_t) -> output_t:
    rgb, _ = data
    weights = torch.tensor(WEIGHTS, device=rgb.device, dtype=torch.float64)
    return (rgb.double() @ weights).float()


def generate_input(height: int, width: int, seed: int, device: str = "cuda") -> input_t:
    """A ``(height, width, 3)`` image with values in [0, 1) and a ``(height, width)`` buffer."""
    gen = make_generator(device, seed)
    rgb = torch.rand(height, width, 3, device=device, dtype=torch.float32, generator=gen)
    return rgb, torch.empty(height, width, device=device, dtype=torch.float32)


check_implementation = make_match_reference(ref_kernel, rtol=1e-5, atol=1e-5)


def flops(height: int, width: int, **_: object) -> float:
    return 5.0 * height * width


def bytes(height: int, width: int, **_: object) -> float:
    return 4.0 * 4 * height * width
