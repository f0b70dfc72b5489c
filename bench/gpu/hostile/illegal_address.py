# Writes through a pointer that points nowhere: a CUDA illegal address.
import torch
from task import input_t, output_t


class _Nowhere:
    __cuda_array_interface__ = {  # noqa: RUF012
        "shape": (1 << 20,),
        "typestr": "<f4",
        "data": (0x1000, False),
        "version": 2,
    }


def custom_kernel(data: input_t) -> output_t:
    torch.as_tensor(_Nowhere(), device="cuda").fill_(1.0)
    torch.cuda.synchronize()
    return data[-1]
