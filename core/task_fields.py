"""GPU MODE's task.yml fields beyond the files, and what kernelcup does with each.

| field | kernelcup |
| --- | --- |
| ``lang`` | ``py`` or ``cu``; anything else is refused (``core.tasks``) |
| ``config`` | ``py``: ``main``, run only as the leaderboard's own evaluator (``evaluator``); ``cu``: the build |
| ``tests``, ``benchmarks`` | the cases; ``seed`` values are the public seeds |
| ``ranking_by`` | ``last`` (GPU MODE's default, so imported problems rank as there), ``mean`` or ``geom`` |
| ``test_timeout``, ``benchmark_timeout``, ``ranked_timeout`` | the harness's limit per mode (``core.timeouts``) |
| ``seed`` | combined into every case seed as GPU MODE's eval combines ``POPCORN_SEED`` with it |
| ``multi_gpu`` | refused: multi-GPU leaderboards are not supported yet |
| ``gpus`` | the GPUs it opens on; a leaderboard only for another vendor's GPUs is refused |
| ``templates`` | what ``template`` hands out |
| ``libraries`` | ``cu``: linked (``-l``); ``py``: nothing to do |
| ``validation`` | ignored (GPU MODE's application validation runs outside a submission) |
| ``evaluator`` | kernelcup's: ``auto`` (default), ``standard`` or ``custom`` (``harness/evaluators.py``) |

Refusals are :class:`~core.errors.UserError`, so ``sync`` lists them per folder and ``create``
answers them, and the other leaderboards of a folder still load.
"""

from __future__ import annotations

import re
from typing import Any

from core.errors import UserError
from harness.evaluators import EVALUATORS

# Leaderboards GPU MODE hosts on other vendors' GPUs name them like this in `gpus`.
_OTHER_VENDORS = (
    (re.compile(r"^(mi\d+\w*|amd\b.*|radeon.*|instinct.*|rx\s?\d+.*)$", re.IGNORECASE), "AMD"),
    (re.compile(r"^(gaudi.*|intel.*|arc\s?[ab]\d+.*)$", re.IGNORECASE), "Intel"),
    (re.compile(r"^(tpu.*|trainium.*|inferentia.*)$", re.IGNORECASE), "non-NVIDIA"),
)
SEED_LIMIT_CU = 2**31  # GPU MODE's CUDA drivers read seeds with std::stoi


def vendor_of(gpu: str) -> str:
    """``"NVIDIA"`` for the GPUs kernelcup runs (and ``cpu``), else the vendor a name points to."""
    for pattern, vendor in _OTHER_VENDORS:
        if pattern.match(gpu.strip()):
            return vendor
    return "NVIDIA"


def refuse_unsupported(task: dict[str, Any], where: str = "task.yml") -> None:
    """Raise a :class:`UserError` naming the first field this leaderboard needs that kernelcup lacks."""
    if task.get("multi_gpu"):
        raise UserError(
            f"{where}: multi-GPU leaderboards are not supported yet (multi_gpu: true)",
            "kernelcup runs every submission on one GPU.",
        )
    gpus = [str(g) for g in task.get("gpus") or []]
    others = sorted({vendor_of(g) for g in gpus} - {"NVIDIA"})
    if gpus and all(vendor_of(g) != "NVIDIA" for g in gpus):
        raise UserError(
            f"{where}: this leaderboard runs on {' and '.join(others)} GPUs ({', '.join(gpus)}); "
            "kernelcup runs NVIDIA GPUs and the CPU only",
            "Leave this problem out, or name an NVIDIA GPU under gpus: if it runs there.",
        )
    evaluator = task.get("evaluator", "auto")
    if evaluator not in EVALUATORS:
        raise UserError(f"{where}: `evaluator` must be one of {', '.join(EVALUATORS)}, not {evaluator!r}")
    seed = task.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise UserError(f"{where}: `seed` must be an integer, not {seed!r}")


def nvidia_gpus(gpus: list[str]) -> list[str]:
    """The GPUs of a task's ``gpus`` list that kernelcup can serve."""
    return [g for g in gpus if vendor_of(g) == "NVIDIA"]


def combine_seed(case_seed: int, task_seed: int) -> int:
    """GPU MODE's eval mixes ``POPCORN_SEED`` into a case seed by Cantor pairing."""
    return case_seed + (case_seed + task_seed) * (case_seed + task_seed + 1) // 2


def cases(task: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``tests`` or ``benchmarks``, with task.yml's ``seed`` combined into each case seed."""
    found = [dict(case) for case in task.get(key) or []]
    task_seed = task.get("seed")
    if not isinstance(task_seed, int) or isinstance(task_seed, bool):
        return found
    for case in found:
        seed = case.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool):
            combined = combine_seed(seed, task_seed)
            case["seed"] = combined % SEED_LIMIT_CU if task.get("lang") == "cu" else combined
    return found


def link_flags(task: dict[str, Any]) -> list[str]:
    """GPU MODE's ``libraries`` of a CUDA leaderboard, as nvcc flags."""
    if task.get("lang") != "cu":
        return []
    return [f"-l{library}" for library in task.get("libraries") or [] if re.fullmatch(r"[\w.+-]+", str(library))]
