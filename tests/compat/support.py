"""Job specs for the compatibility leaderboards, built by the core's own code.

``kernelcup.core.leaderboards.tasks`` reads the folder and ``kernelcup.core.pipeline.jobspec.spec_for``
builds the spec, as the local runner does for a stored leaderboard; the harness then runs for real
(``tests/harness``'s helpers start ``python -m kernelcup.harness``).
"""

from __future__ import annotations

from pathlib import Path

from kernelcup.core.leaderboards.tasks import read_task_folder
from kernelcup.core.pipeline.jobspec import spec_for
from kernelcup.harness.spec import GpuInfo, JobSpec, Mode
from tests.harness.conftest import DEVICE

HERE = Path(__file__).resolve().parent
LEADERBOARDS = HERE / "leaderboards"
SUBMISSIONS = HERE / "submissions"


def submission(name: str) -> str:
    return (SUBMISSIONS / f"{name}.py.txt").read_text()


def compat_spec(
    leaderboard: str,
    code: str,
    mode: Mode | str = Mode.TEST,
    *,
    timeout_s: float = 90.0,
    secret_seed: int | None = None,
) -> JobSpec:
    folder = read_task_folder(LEADERBOARDS / leaderboard)
    spec = spec_for(
        folder.task,
        folder.files,
        code,
        Mode(mode),
        job_id=f"compat-{leaderboard}",
        gpu=GpuInfo(),
        device=DEVICE,
        secret_seed=secret_seed,
        default_timeout_s=timeout_s,
    )
    spec.timeout_s = timeout_s
    return spec
