import torch
from task import input_t, output_t
from utils import make_generator, make_match_reference

DTYPES = {"float32": torch.float32, "float16": torch.float16}
TOLERANCES = {torch.float32: (2e-5, 1e-6), torch.float16: (2e-3, 1e-5)}  # (rtol, atol)


def ref_kernel(data: input_t) -> output_t:
    x, _ = data
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def generate_input(rows: int, cols: int, dtype: str, seed: int, device: str = "cuda") -> input_t:
    """``3 * N(0, 1)`` plus a per-row offset in [-50, 100), and an output buffer."""
    gen = make_generator(device, seed)
    x = 3.0 * torch.randn(rows, cols, device=device, generator=gen)
    x += -50.0 + 150.0 * torch.rand(rows, 1, device=device, generator=gen)
    x = x.to(DTYPES[dtype])
    return x, torch.empty_like(x)


def check_implementation(data: input_t, output: output_t) -> tuple[bool, str]:
    rtol, atol = TOLERANCES[data[0].dtype]
    return make_match_reference(ref_kernel, rtol=rtol, atol=atol)(data, output)


def flops(rows: int, cols: int, **_: object) -> float:
    return 5.0 * rows * cols  # max, subtract, exp, sum, divide


def bytes(rows: int, cols: int, dtype: str, **_: object) -> float:
    return 2.0 * DTYPES[dtype].itemsize * rows * cols
