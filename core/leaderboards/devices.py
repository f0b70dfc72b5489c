"""Whether a leaderboard can run on the CPU or needs a CUDA GPU, decided once from its files.

The answer is stored with the leaderboard when it is created or refreshed from its folder
(``Leaderboard.needs_cuda``), so ``list`` can say where it runs and ``submit`` can refuse a GPU it
cannot run on before anything is queued, instead of a job failing on the CPU.

The rules, first match wins (declared facts before the heuristic):

1. The GPUs its task.yml (or GPU MODE problem set) names include ``cpu``: it runs on the CPU.
2. ``lang: cu``: CUDA only. nvcc's binary needs a GPU to run (``harness/cuda_eval.py`` ends such a
   run on the CPU with "CUDA leaderboards need a GPU").
3. Python whose ``generate_input`` takes a ``device`` parameter (or ``**kwargs``): the harness
   hands it the run's device (``harness/problem.py``), so it runs on the CPU too. Every shipped
   leaderboard is of this kind.
4. Python whose ``generate_input`` takes no device: CUDA only where one of its Python files
   names a ``"cuda"`` device or calls ``.cuda()`` (GPU MODE references often make their inputs
   on "cuda" whatever the machine: ``tests/compat/leaderboards/cuda_only``); otherwise its
   tensors land on torch's default device, the CPU.

Rule 4 reads source, so it can be wrong both ways (a "cuda" string that is only a check, or a
helper that picks a GPU another way); a wrong "CPU" answer still ends in the harness's one-line
verdict on the CPU, as before.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

CPU = "cpu"
# A "cuda" device in Python source: "cuda", 'cuda:0', device="cuda", .cuda(), torch.device("cuda").
_CUDA_DEVICE = re.compile(r"""(["'])cuda(:\d+)?\1|\.cuda\(\s*\)""")


def cuda_reason(task: Mapping[str, Any], files: Mapping[str, str], gpus: list[str] | None = None) -> str | None:
    """Why the leaderboard needs a CUDA GPU, in a few words for ``list`` and refusals; None when
    it runs on the CPU as well. ``gpus``: the GPUs it was declared for where they come from
    elsewhere than task.yml (a GPU MODE problem set)."""
    declared = [str(g).lower() for g in (gpus if gpus is not None else task.get("gpus") or [])]
    if CPU in declared:
        return None
    if task.get("lang", "py") == "cu":
        return "CUDA source"
    sources = {name: text for name, text in files.items() if name.endswith(".py")}
    takes_device = _generate_input_takes_device(sources)
    if takes_device is not False:  # takes one, or no generate_input was found to read
        return None
    if any(_CUDA_DEVICE.search(text) for text in sources.values()):
        return "its inputs are made on cuda"
    return None


def _generate_input_takes_device(sources: Mapping[str, str]) -> bool | None:
    """Whether ``generate_input`` declares ``device`` (reference.py first); None when no file
    defines it."""
    for name in sorted(sources, key=lambda n: n != "reference.py"):
        try:
            tree = ast.parse(sources[name])
        except (SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "generate_input":
                args = node.args
                names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
                return "device" in names or args.kwarg is not None
    return None


def runs_on(gpus: list[str], needs_cuda: bool) -> list[str]:
    """Of a leaderboard's GPUs, those it can run on: all but the CPU for one that needs CUDA."""
    return [g for g in gpus if not (needs_cuda and g == CPU)]


def cuda_refusal(name: str, here: list[str], declared: list[str], reason: str) -> str:
    """The one line that refuses a CUDA-only leaderboard's submission: where it runs here (the
    CPU was asked for), or that this bot has no GPU it can run on and where it would run."""
    needs = f"{name} needs a CUDA GPU ({reason})"
    if here:
        return f"{needs} and cannot run on the CPU: submit it to {', '.join(here)}."
    elsewhere = [g for g in declared if g.lower() != CPU]
    if elsewhere:
        return f"{needs}: it runs on {', '.join(elsewhere)}, and this bot has none of them."
    return f"{needs}, and this bot has no GPU it can run on."
