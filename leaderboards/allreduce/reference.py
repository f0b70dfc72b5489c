import torch
import torch.distributed as dist
from task import input_t, output_t
from utils import make_generator, verbose_allclose, verdict


def generate_input(rank: int, world_size: int, size: int, seed: int, device: str = "cuda") -> input_t:
    """Rank ``rank``'s vector: N(0, 1) + rank, from its own generator (seed and rank)."""
    gen = make_generator(device, seed * 64 + rank)
    return torch.randn(size, device=device, dtype=torch.float32, generator=gen) + rank


def ref_kernel(data: input_t) -> output_t:
    """Every rank's vector gathered, summed in float64 (collective: every rank calls it)."""
    parts = [torch.empty_like(data) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, data.contiguous())
    return torch.stack(parts).double().sum(dim=0).float()


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    expected = ref_kernel(data)
    tolerance = 1e-5 * dist.get_world_size()
    return verdict(verbose_allclose(output, expected, rtol=tolerance, atol=tolerance))


def bytes(world_size: int, size: int, **_: object) -> float:
    """What a ring all-reduce moves per rank: 2 (n - 1) / n of the vector, out and in."""
    return 2.0 * 4.0 * size * (world_size - 1) / world_size
