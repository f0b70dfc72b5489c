"""The GPU scripts (bench/gpu) start, and take their GPUs' peaks from the registry the bot uses.

They run only on a leased GPU machine; here, on the CPU, each starts far enough to parse its
arguments (every import resolved), so a broken import shows up in CI rather than on a lease.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO

from kernelcup.core.config import load_settings

GPU_SCRIPTS = REPO / "bench" / "gpu"


@pytest.mark.parametrize("script", ["run_all.py", "gpumode_compat.py", "pairs.sh", "lease.sh"])
def test_each_gpu_script_starts(script: str) -> None:
    if script.endswith(".sh"):
        command = ["bash", "-n", str(GPU_SCRIPTS / script)]  # parsed, not run: it deals out GPUs
    else:
        command = [sys.executable, str(GPU_SCRIPTS / script), "--help"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_a_cards_peaks_are_its_registry_entrys_the_longest_name_it_holds() -> None:
    sys.path.insert(0, str(GPU_SCRIPTS))
    try:
        import registry
    finally:
        sys.path.remove(str(GPU_SCRIPTS))
    gpus = load_settings().gpus
    h100 = registry.gpu_info("NVIDIA H100 80GB HBM3")
    assert (h100.peak_bandwidth_gbps, h100.peak_tflops) == (gpus["H100"].peak_bandwidth_gbps, gpus["H100"].peak_tflops)
    assert h100.name == "NVIDIA H100 80GB HBM3" and h100.peak_bandwidth_gbps
    h200 = registry.gpu_info("NVIDIA H200")
    assert h200.peak_bandwidth_gbps == gpus["H200"].peak_bandwidth_gbps != h100.peak_bandwidth_gbps
    unknown = registry.gpu_info("NVIDIA GeForce RTX 4090")  # commented out in the shipped registry
    assert (unknown.peak_bandwidth_gbps, unknown.peak_tflops) == (None, None)
