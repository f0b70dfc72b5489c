"""A GPU's nominal peaks for the GPU scripts' roofline figures and physical floors, from the GPU
registry the bot itself uses (config/kernelcup.yml's ``gpus``, environment overrides included),
matched to the card's name as the local runner matches it: the longest single-card entry whose
name the card's name contains ("NVIDIA H100 80GB HBM3" -> H100)."""

from __future__ import annotations

import functools

from kernelcup.core.config import GpuConfig, load_settings
from kernelcup.harness.spec import GpuInfo


@functools.cache
def _cards() -> list[GpuConfig]:
    """The registry's single-card entries, longest name first (read once: a script asks per job)."""
    cards = [gpu for gpu in load_settings().gpus.values() if gpu.name != "cpu" and gpu.count == 1]
    return sorted(cards, key=lambda gpu: len(gpu.name), reverse=True)


def gpu_info(name: str) -> GpuInfo:
    """``name`` (torch's device name) with the registry's peaks; none where no entry matches."""
    for gpu in _cards():
        if gpu.name.lower() in name.lower():
            return GpuInfo(name=name, peak_bandwidth_gbps=gpu.peak_bandwidth_gbps, peak_tflops=gpu.peak_tflops)
    return GpuInfo(name=name)
