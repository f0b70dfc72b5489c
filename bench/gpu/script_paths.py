"""What the GPU scripts (run_all.py, gpumode_compat.py) need before their own imports.

They run as files on a GPU image: the repository and the harness tests' helpers go on the path,
and where the image lacks PyYAML, ``taskyml`` (the subset task.yml uses) stands in for it.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(REPO), str(REPO / "tests" / "harness"), str(HERE)]
try:
    import yaml  # noqa: F401
except ImportError:  # GPU images often lack PyYAML: task.yml needs only a small subset
    import taskyml

    sys.modules["yaml"] = taskyml
