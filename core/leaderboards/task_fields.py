"""GPU MODE's task.yml fields beyond the files, and what kernelcup does with each.

| field | kernelcup |
| --- | --- |
| ``lang`` | ``py`` or ``cu``; anything else is refused (``kernelcup.core.leaderboards.tasks``) |
| ``config`` | ``py``: ``main``, run only as the leaderboard's own evaluator (``evaluator``); ``cu``: the build |
| ``tests``, ``benchmarks`` | the cases; ``seed`` values are the public seeds |
| ``ranking_by`` | ``last`` (GPU MODE's default, so imported problems rank as there), ``mean`` or ``geom`` |
| ``test_timeout``, ``benchmark_timeout``, ``ranked_timeout`` | the harness's limit per mode (``pipeline.timeouts``) |
| ``seed`` | combined into every case seed as GPU MODE's eval combines ``POPCORN_SEED`` with it |
| ``multi_gpu`` | one process per rank; every case names the same ``world_size`` (``harness/multi_gpu.py``) |
| ``gpus`` | the GPUs it opens on; a leaderboard only for another vendor's GPUs is refused |
| ``templates`` | what ``template`` hands out |
| ``libraries`` | ``cu``: linked (``-l``); ``py``: nothing to do |
| ``validation`` | ignored (GPU MODE's application validation runs outside a submission) |
| ``evaluator`` | kernelcup's: ``auto`` (default), ``standard`` or ``custom`` (``harness/evaluators.py``) |

Refusals are :class:`~kernelcup.core.errors.UserError`, so ``sync`` lists them per folder and ``create``
answers them, and the other leaderboards of a folder still load.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kernelcup.core.errors import UserError
from kernelcup.harness.evaluators import EVALUATORS

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
    check_ranks(task, where)


MAX_WORLD_SIZE = 64


def check_ranks(task: dict[str, Any], where: str = "task.yml") -> None:
    """A multi-GPU leaderboard's ranks: ``world_size`` in every case, the same in all of them."""
    labelled = [(f"{key[:-1]} {i + 1}", case) for key in ("tests", "benchmarks")
                for i, case in enumerate(task.get(key) or []) if isinstance(case, dict)]
    if not task.get("multi_gpu"):
        named = next((label for label, case in labelled if "world_size" in case), None)
        if named:
            raise UserError(f"{where}: {named} names a world_size but the leaderboard is not multi-GPU",
                            "Add multi_gpu: true to task.yml, or drop world_size from the cases.")
        return
    if task.get("lang", "py") != "py":
        raise UserError(f"{where}: a multi-GPU leaderboard must be a Python leaderboard (lang: py)")
    if task.get("evaluator", "auto") == "custom":
        raise UserError(f"{where}: a multi-GPU leaderboard runs with kernelcup's harness, not its own evaluator",
                        "Use evaluator: auto or standard.")
    sizes: set[int] = set()
    for label, case in labelled:
        value = case.get("world_size")
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_WORLD_SIZE:
            raise UserError(f"{where}: {label} of a multi-GPU leaderboard needs world_size, a whole number of "
                            f"ranks from 1 to {MAX_WORLD_SIZE} (got {value!r})")
        sizes.add(value)
    if len(sizes) > 1:
        raise UserError(f"{where}: the cases of a multi-GPU leaderboard must all have the same world_size "
                        f"(found {', '.join(map(str, sorted(sizes)))})",
                        "kernelcup starts one set of ranks per job; make one leaderboard per world_size.")


def world_size(task: dict[str, Any]) -> int:
    """The ranks a multi-GPU leaderboard runs on; 0 for a single-GPU leaderboard."""
    if not task.get("multi_gpu"):
        return 0
    sizes = [case.get("world_size") for key in ("tests", "benchmarks") for case in task.get(key) or []]
    return max((int(s) for s in sizes if isinstance(s, int)), default=1)


def gpus_for_ranks(
    task: dict[str, Any], gpus: list[str], cards: Mapping[str, int], where: str, strict: bool = False
) -> list[str]:
    """The GPUs of ``gpus`` a leaderboard can run on, by their card count (``cards``, from the GPU
    registry): a multi-GPU one where an entry has at least ``world_size`` cards; a single-GPU one
    on single cards. Raises a :class:`UserError` in one line when none is left, or, ``strict``
    (GPUs a creator named), when any named one cannot run it."""
    ranks = world_size(task)
    short = [g for g in gpus if ranks and cards.get(g, 1) < ranks]
    if strict and short:
        have = ", ".join(f"{g} has {cards.get(g, 1)}" for g in short)
        raise UserError(f"{where}: its cases run {ranks} ranks (world_size {ranks}), one per GPU, and {have}",
                        "Name GPU entries with enough cards (e.g. H200x2), or lower world_size.")
    if not ranks:
        fit = [g for g in gpus if cards.get(g, 1) == 1 or g == "cpu"]  # cpu's count is ranks, not cards
        if gpus and not fit:
            raise UserError(f"{where}: a single-GPU leaderboard cannot run on {', '.join(gpus)} "
                            "(entries of several cards, for multi-GPU leaderboards)", "Name a single card or cpu.")
        return fit
    fit = [g for g in gpus if cards.get(g, 1) >= ranks]
    if not fit:
        have = ", ".join(f"{g} has {cards.get(g, 1)}" for g in gpus) or "no GPU is served"
        raise UserError(
            f"{where}: its cases run {ranks} ranks (world_size {ranks}), one per GPU, and no GPU here has that "
            f"many cards ({have})",
            "Add a GPU entry with enough cards to gpus: in the config (e.g. H200x8: {runner: local, count: 8}), "
            "or lower world_size.",
        )
    return fit


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
