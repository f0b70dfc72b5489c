# expect: pass
"""launches's five elementwise ops captured once per shape in a CUDA graph, then per call: the
inputs copied into the graph's buffers, one replay, the result copied out (the usual way to
replay a graph on inputs that live somewhere new every call). Eager on the CPU."""
import torch
from task import input_t, output_t

_graphs: dict[tuple[int, torch.device], tuple[torch.cuda.CUDAGraph, list[torch.Tensor]]] = {}


def _chain(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, out: torch.Tensor) -> None:
    torch.mul(a, 2, out=out)
    out.add_(b)
    out.relu_()
    out.sub_(c)
    out.abs_()


def _captured(a: torch.Tensor) -> tuple[torch.cuda.CUDAGraph, list[torch.Tensor]]:
    buffers = [torch.zeros_like(a) for _ in range(4)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch's docs do it
        _chain(*buffers)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _chain(*buffers)
    return graph, buffers


def custom_kernel(data: input_t) -> output_t:
    a, b, c, out = data
    if not a.is_cuda:
        _chain(a, b, c, out)
        return out
    key = (a.numel(), a.device)
    if key not in _graphs:
        _graphs[key] = _captured(a)
    graph, (sa, sb, sc, so) = _graphs[key]
    sa.copy_(a)
    sb.copy_(b)
    sc.copy_(c)
    graph.replay()
    out.copy_(so)
    return out
