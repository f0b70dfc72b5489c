import torch
from task import input_t, output_t
from utils import make_generator, verbose_allequal, verdict


def ref_kernel(data: input_t) -> output_t:
    values, bins = data
    index = values.long() * bins // 256
    return torch.bincount(index, minlength=bins).int()


def generate_input(size: int, bins: int, contention: int, seed: int, device: str = "cuda") -> input_t:
    """``size`` uint8 values, ``contention`` percent of them equal to one random value."""
    assert 1 <= bins <= 256, "bins must be between 1 and 256"
    gen = make_generator(device, seed)
    values = torch.randint(0, 256, (size,), device=device, dtype=torch.uint8, generator=gen)
    hot_value = torch.randint(0, 256, (), device=device, dtype=torch.uint8, generator=gen)
    hot = torch.rand(size, device=device, generator=gen) < contention / 100.0
    values[hot] = hot_value
    return values, bins


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    return verdict(verbose_allequal(output, ref_kernel(data)))


def bytes(size: int, bins: int, **_: object) -> float:
    return float(size) + 4.0 * bins
