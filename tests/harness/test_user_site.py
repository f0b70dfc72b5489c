"""A submission cannot plant code for its job's later processes to run.

The job's HOME is the submission's to write. A Python that honours the user site folder (any
system Python; a virtual environment made with ``--system-site-packages``) imports
``~/.local/lib/pythonX.Y/site-packages/usercustomize.py`` and runs that folder's ``.pth`` files
at start-up, before ``-m`` runs anything: code a submission planted there in the tests' process
would run first in each ranked round's fresh process, ahead of the harness's own code and the
timing primitives it captures before the submission is imported. The harness starts every such
process with ``-s`` and PYTHONNOUSERSITE (``harness/process.py``, PYTHON_FLAGS).

Nor can it plant GPU kernels through torch's kernel cache, which sits in the same HOME, for the
job's next process to load as torch's own.

The project's own virtual environment ignores the user site folder whatever the harness does,
so these tests run the harness under an interpreter that honours it: a virtual environment with
the system's site packages, which sees the project's packages through a ``.pth`` file.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEVICE, LEADERBOARDS, REPO, leaderboard_spec, read_run, run_harness

from kernelcup.harness.spec import Mode, Status

PLANTER = """
import builtins, os, site
import torch
from task import input_t, output_t

print("PROCESS", os.getpid(), "planted code ran:", getattr(builtins, "_planted_by_submission", False), flush=True)
folder = site.getusersitepackages()
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, "usercustomize.py"), "w") as planted:
    planted.write("import builtins\\nbuiltins._planted_by_submission = True\\n")
with open(os.path.join(folder, "planted.pth"), "w") as planted:
    planted.write("import builtins; builtins._planted_by_submission = True\\n")
print("PLANTED IN", folder, flush=True)


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    out.copy_(a * 2 + b)
    return out
"""


KERNEL_CACHE_PROBE = """
import pathlib
import torch
from task import input_t, output_t

cache = pathlib.Path.home() / ".cache" / "torch" / "kernels"
print("CACHED KERNELS", len(list(cache.glob("*"))) if cache.is_dir() else 0, flush=True)


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    out.copy_(a * 2 + b)
    return out
"""
needs_gpu = pytest.mark.skipif(DEVICE != "cuda", reason="torch's kernel cache holds NVRTC builds: GPU only")


@pytest.fixture(scope="module")
def python_with_user_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment over the system's site packages (so the user site folder counts),
    with the project's own environment added through a ``.pth`` file."""
    where = tmp_path_factory.mktemp("usersite") / "py"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", "--system-site-packages", str(where)], check=True)
    packages = next((where / "lib").glob("python*/site-packages"))
    ours = [folder for folder in site.getsitepackages() if Path(folder).is_dir()]
    lines = [f"import site; site.addsitedir({folder!r})" for folder in ours]
    (packages / "project-environment.pth").write_text("\n".join(lines) + "\n")
    return where / "bin" / "python"


def test_the_interpreter_honours_the_user_site_folder(python_with_user_site: Path, tmp_path: Path) -> None:
    """Without the harness's flags, code planted in a HOME's user site folder runs at start-up:
    the test below would prove nothing otherwise."""
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("PYTHONNOUSERSITE", None)
    folder = subprocess.run(
        [python_with_user_site, "-c", "import site; print(site.getusersitepackages())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(folder).mkdir(parents=True)
    (Path(folder) / "usercustomize.py").write_text("import builtins\nbuiltins._planted_by_submission = True\n")
    probe = "import builtins, torch; print(getattr(builtins, '_planted_by_submission', False))"
    plain = subprocess.run([python_with_user_site, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert plain.stdout.strip() == "True"
    flagged = subprocess.run(
        [python_with_user_site, "-P", "-s", "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert flagged.stdout.strip() == "False"


def test_code_a_submission_plants_in_the_user_site_folder_never_runs_in_the_jobs_later_processes(
    python_with_user_site: Path,
) -> None:
    spec = leaderboard_spec(LEADERBOARDS / "addmul", PLANTER, Mode.RANKED, timeout_s=60)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONNOUSERSITE"}
    completed = subprocess.run(
        [python_with_user_site, "-m", "kernelcup.harness"],
        input=spec.to_json(),
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=spec.timeout_s + 60,
    )
    result = read_run(completed.stdout, completed.stderr, completed.returncode, spec.result_key).outcome()
    assert result.status is Status.PASSED, (result.verdict, completed.stderr[-2000:])
    processes = [line for line in result.stdout.splitlines() if line.startswith("PROCESS")]
    assert result.stdout.count("PLANTED IN") == len(processes) >= 2, result.stdout  # later processes started
    assert all(line.endswith("planted code ran: False") for line in processes), result.stdout


@needs_gpu
def test_a_jiterator_kernel_would_otherwise_be_cached_in_home(tmp_path: Path) -> None:
    """torch caches NVRTC builds in HOME by default: the test below would prove nothing otherwise."""
    build = (
        "import torch; add_one = torch.cuda.jiterator._create_jit_fn('template <typename T> T add_one(T x) "
        "{ return x + T(1); }'); add_one(torch.ones(4, device='cuda')); torch.cuda.synchronize()"
    )
    env = {**os.environ, "HOME": str(tmp_path)}
    for key in ("USE_PYTORCH_KERNEL_CACHE", "PYTORCH_KERNEL_CACHE_PATH", "XDG_CACHE_HOME"):
        env.pop(key, None)
    subprocess.run([sys.executable, "-c", build], env=env, cwd=REPO, check=True, timeout=300)
    assert list((tmp_path / ".cache" / "torch" / "kernels").glob("*"))


@needs_gpu
def test_no_process_of_a_job_keeps_gpu_kernels_where_the_submission_can_replace_them() -> None:
    spec = leaderboard_spec(LEADERBOARDS / "addmul", KERNEL_CACHE_PROBE, Mode.RANKED, timeout_s=90)
    result = run_harness(spec).outcome()
    assert result.status is Status.PASSED, result.verdict
    counts = [line for line in result.stdout.splitlines() if line.startswith("CACHED KERNELS")]
    assert len(counts) >= 2 and all(line == "CACHED KERNELS 0" for line in counts), result.stdout
