"""The shipped leaderboards in ``leaderboards/``: complete files, and the verdict each solution
is labelled with, checked on the CPU.

This is a sanity check of the problem files (reference, checks, inputs), not of the harness:
it calls ``generate_input(..., device="cpu")``, hands a clone to ``custom_kernel`` and checks
the result the way GPU MODE's eval does. Solutions marked ``# requires: cuda`` (Triton, inline
CUDA) and CUDA leaderboards' sources are only checked for their headers here.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, get_type_hints

import pytest
import torch
import yaml

LEADERBOARDS = Path(__file__).resolve().parents[2] / "leaderboards"
FOLDERS = sorted(p for p in LEADERBOARDS.iterdir() if (p / "task.yml").is_file())
REQUIRED_KEYS = {
    "files", "lang", "description", "config", "templates", "tests", "benchmarks",
    "test_timeout", "benchmark_timeout", "ranked_timeout", "ranking_by",
}  # fmt: skip
# Leaderboards whose data tuple ends with a preallocated output buffer that the harness
# fills with NaN before each call.
OUTPUT_BUFFER = {"identity", "vectoradd", "grayscale", "softmax", "prefixsum"}
# Multi-GPU leaderboards (task.yml multi_gpu: true): their files are checked here as one rank of a
# one-rank gloo group (``one_rank``); their solutions' verdicts need two ranks and come from the
# real harness (tests/harness/test_shipped_leaderboards.py).
MULTI_GPU = {folder.name for folder in FOLDERS if yaml.safe_load((folder / "task.yml").read_text()).get("multi_gpu")}
# Module names a leaderboard's files are imported under, as in GPU MODE's eval.
MODULE_NAMES = ("task", "reference", "utils", "submission")


def load_task(folder: Path) -> dict[str, Any]:
    task = yaml.safe_load((folder / "task.yml").read_text())
    assert isinstance(task, dict), f"{folder.name}/task.yml is not a mapping"
    return task


@dataclass(frozen=True)
class Solution:
    path: Path
    leaderboard: str  # from the #!POPCORN line
    expect: str  # "pass" or "fail"
    requires_cuda: bool

    @property
    def id(self) -> str:
        return self.path.relative_to(LEADERBOARDS).as_posix()


def read_header(path: Path) -> dict[str, str]:
    """The leading comment lines: ``#!POPCORN leaderboard X`` and ``# key: value``."""
    header: dict[str, str] = {}
    comment = "//" if path.suffix in {".cu", ".cuh", ".h"} else "#"
    for line in path.read_text().splitlines():
        if line.startswith(comment + "!POPCORN "):
            key, _, value = line[len(comment) + 1 :].partition(" ")[2].partition(" ")
            header[key] = value.strip()
        elif line.startswith(comment + " ") and ":" in line:
            key, _, value = line[len(comment) + 1 :].partition(":")
            header[key.strip()] = value.strip()
        else:
            break
    return header


def solutions_of(folder: Path) -> list[Solution]:
    found = []
    for path in sorted((folder / "solutions").glob("*")):
        header = read_header(path)
        found.append(
            Solution(
                path=path,
                leaderboard=header.get("leaderboard", ""),
                expect=header.get("expect", ""),
                requires_cuda=header.get("requires") == "cuda",
            )
        )
    return found


def plain_templates(folder: Path) -> list[Solution]:
    """Templates that run on the CPU: they must pass as they stand."""
    found = []
    for name in load_task(folder)["templates"].values():
        path = folder / name
        source = path.read_text()
        if path.suffix == ".py" and "triton" not in source and "load_inline" not in source:
            found.append(Solution(path, folder.name, "pass", requires_cuda=False))
    return found


ALL_SOLUTIONS = [s for folder in FOLDERS for s in solutions_of(folder)]
CPU_RUNNABLE = [
    s
    for folder in FOLDERS
    if load_task(folder)["lang"] == "py" and folder.name not in MULTI_GPU
    for s in solutions_of(folder) + plain_templates(folder)
    if not s.requires_cuda
]
PY_FOLDERS = [f for f in FOLDERS if load_task(f)["lang"] == "py"]
CU_FOLDERS = [f for f in FOLDERS if load_task(f)["lang"] == "cu"]
CU_SUBMISSIONS = [
    (folder, path)
    for folder in CU_FOLDERS
    for path in sorted((folder / "solutions").glob("*.cu"))
    + [folder / name for name in load_task(folder)["templates"].values()]
]
NVCC = shutil.which("nvcc")
# As the harness builds (harness/compile.py), for Hopper; compile only, nothing runs here.
NVCC_FLAGS = ["-std=c++17", "-O3", "-lineinfo", "-arch=sm_90"]


@contextmanager
def leaderboard_modules(
    folder: Path, submission: Path | None, workdir: Path
) -> Iterator[tuple[ModuleType, ModuleType | None]]:
    """Lay the leaderboard's files out as the harness does and import them.

    Returns the ``reference`` and ``submission`` modules; restores ``sys.modules`` after, so
    the next leaderboard's ``task`` and ``utils`` are imported afresh.
    """
    for entry in load_task(folder)["files"]:
        if entry["source"] != "@SUBMISSION@":
            shutil.copy(folder / entry["source"], workdir / entry["name"])
    if submission is not None:
        shutil.copy(submission, workdir / "submission.py")
    saved = {name: sys.modules.pop(name) for name in MODULE_NAMES if name in sys.modules}
    sys.path.insert(0, str(workdir))
    importlib.invalidate_caches()
    try:
        reference = importlib.import_module("reference")
        yield reference, importlib.import_module("submission") if submission else None
    finally:
        sys.path.remove(str(workdir))
        for name in MODULE_NAMES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


@pytest.fixture(scope="module", autouse=True)
def one_rank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A gloo group of one rank in this process, for the multi-GPU leaderboards' collectives."""
    import torch.distributed as dist

    store = tmp_path_factory.mktemp("gloo") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def cpu_case(folder: Path, case: dict[str, Any]) -> dict[str, Any]:
    """``generate_input``'s arguments on the CPU; a multi-GPU leaderboard's as its only rank."""
    extra: dict[str, Any] = {"rank": 0, "world_size": 1} if folder.name in MULTI_GPU else {}
    return {**case, **extra, "device": "cpu"}


def clone(data: Any) -> Any:
    if isinstance(data, tuple):
        return tuple(clone(x) for x in data)
    if isinstance(data, list):
        return [clone(x) for x in data]
    if isinstance(data, dict):
        return {k: clone(v) for k, v in data.items()}
    if isinstance(data, torch.Tensor):
        return data.clone()
    return data


def inputs_of(leaderboard: str, data: Any) -> list[torch.Tensor]:
    """The input tensors of ``data``: everything but an output buffer, whose contents are
    undefined."""
    items = list(data) if isinstance(data, tuple | list) else [data]
    if leaderboard in OUTPUT_BUFFER:
        items = items[:-1]
    return [x for x in items if isinstance(x, torch.Tensor)]


def run_cases(folder: Path, solution: Path, workdir: Path) -> list[tuple[bool, str]]:
    verdicts = []
    with leaderboard_modules(folder, solution, workdir) as (reference, submission):
        assert submission is not None
        for case in load_task(folder)["tests"]:
            data = reference.generate_input(**cpu_case(folder, case))
            given = clone(data)
            if folder.name in OUTPUT_BUFFER:
                given[-1].fill_(math.nan)  # as the harness does
            output = submission.custom_kernel(given)
            verdicts.append(reference.check_implementation(data, output))
    return verdicts


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_task_yml_has_every_required_key(folder: Path) -> None:
    task = load_task(folder)
    assert task.keys() >= REQUIRED_KEYS, f"missing: {sorted(REQUIRED_KEYS - task.keys())}"
    assert task["lang"] in {"py", "cu"}
    assert task["ranking_by"] == "geom"
    assert 3 <= len(task["tests"]) <= 6
    assert 2 <= len(task["benchmarks"]) <= 4
    assert all("seed" in case for case in task["tests"] + task["benchmarks"])
    assert [f for f in task["files"] if f["source"] == "@SUBMISSION@"], "no submission entry"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_file_named_in_task_yml_exists(folder: Path) -> None:
    task = load_task(folder)
    named = [f["source"] for f in task["files"] if f["source"] != "@SUBMISSION@"]
    named += list(task["templates"].values())
    missing = [name for name in named if not (folder / name).is_file()]
    assert not missing, f"{folder.name}: missing {missing}"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_ships_a_correct_a_wrong_and_a_fast_solution(folder: Path) -> None:
    shipped = solutions_of(folder)
    assert any(s.expect == "pass" and not s.requires_cuda for s in shipped), "no plain solution"
    assert any(s.expect == "fail" for s in shipped), "no wrong solution"
    if folder.name in MULTI_GPU:  # runs on the CPU too (gloo): a second passing solution, the fast one
        assert sum(s.expect == "pass" for s in shipped) >= 2, "no fast solution"
    elif load_task(folder)["lang"] == "py":
        assert any(s.expect == "pass" and s.requires_cuda for s in shipped), "no fast solution"


@pytest.mark.parametrize("solution", ALL_SOLUTIONS, ids=lambda s: s.id)
def test_solution_header_names_its_leaderboard_and_verdict(solution: Solution) -> None:
    assert solution.leaderboard == solution.path.relative_to(LEADERBOARDS).parts[0]
    assert solution.expect in {"pass", "fail"}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_templates_name_their_leaderboard(folder: Path) -> None:
    for name in load_task(folder)["templates"].values():
        assert read_header(folder / name).get("leaderboard") == folder.name, name


@pytest.mark.parametrize("folder", PY_FOLDERS, ids=lambda p: p.name)
def test_task_module_types_match_the_cases(folder: Path, tmp_path: Path) -> None:
    with leaderboard_modules(folder, None, tmp_path):
        task = importlib.import_module("task")
        assert hasattr(task, "input_t") and hasattr(task, "output_t")
        fields = set(get_type_hints(task.TestSpec))
    for case in load_task(folder)["tests"] + load_task(folder)["benchmarks"]:
        assert set(case) == fields, f"case {case} does not match TestSpec {sorted(fields)}"


@pytest.mark.parametrize("solution", CPU_RUNNABLE, ids=lambda s: s.id)
def test_solution_gets_its_expected_verdict(solution: Solution, tmp_path: Path) -> None:
    folder = LEADERBOARDS / solution.leaderboard
    verdicts = run_cases(folder, solution.path, tmp_path)
    if solution.expect == "pass":
        failures = [message for ok, message in verdicts if not ok]
        assert not failures, failures
    else:
        assert not all(ok for ok, _ in verdicts), "a wrong solution passed every test"
        assert all(message for ok, message in verdicts if not ok), "a failure without a message"


@pytest.mark.parametrize("folder", PY_FOLDERS, ids=lambda p: p.name)
def test_generate_input_depends_on_the_seed_alone(folder: Path, tmp_path: Path) -> None:
    case = max(load_task(folder)["tests"], key=lambda c: sorted(c.items()))
    with leaderboard_modules(folder, None, tmp_path) as (reference, _):
        torch.manual_seed(1)
        first = inputs_of(folder.name, reference.generate_input(**cpu_case(folder, case)))
        torch.manual_seed(2)  # the global RNG must not matter
        again = inputs_of(folder.name, reference.generate_input(**cpu_case(folder, case)))
        other_case = {**case, "seed": case["seed"] + 1}
        other = inputs_of(folder.name, reference.generate_input(**cpu_case(folder, other_case)))
    assert first, "no input tensors"
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("folder", PY_FOLDERS, ids=lambda p: p.name)
def test_reference_passes_its_own_check_and_fills_the_buffer_shape(folder: Path, tmp_path: Path) -> None:
    case = load_task(folder)["tests"][-1]
    with leaderboard_modules(folder, None, tmp_path) as (reference, _):
        data = reference.generate_input(**cpu_case(folder, case))
        expected = reference.ref_kernel(clone(data))
        assert reference.check_implementation(data, expected) == (True, "")
    if folder.name in OUTPUT_BUFFER:
        buffer = data[-1]
        assert (buffer.shape, buffer.dtype) == (expected.shape, expected.dtype)


@pytest.mark.parametrize("folder", PY_FOLDERS, ids=lambda p: p.name)
def test_check_rejects_nan(folder: Path, tmp_path: Path) -> None:
    case = load_task(folder)["tests"][-1]
    with leaderboard_modules(folder, None, tmp_path) as (reference, _):
        data = reference.generate_input(**cpu_case(folder, case))
        output = reference.ref_kernel(clone(data))
        if not output.is_floating_point():
            pytest.skip("integer output cannot hold NaN")
        output.view(-1)[-1] = math.nan
        ok, message = reference.check_implementation(data, output)
    assert not ok
    assert "1 of" in message and "got nan" in message


@pytest.mark.parametrize("folder", PY_FOLDERS, ids=lambda p: p.name)
def test_flops_and_bytes_are_positive(folder: Path, tmp_path: Path) -> None:
    task = load_task(folder)
    with leaderboard_modules(folder, None, tmp_path) as (reference, _):
        assert hasattr(reference, "bytes"), "every leaderboard moves bytes"
        for case in task["tests"] + task["benchmarks"]:
            for name in ("flops", "bytes"):
                if hasattr(reference, name):
                    value = getattr(reference, name)(**case)
                    assert isinstance(value, float) and 0 < value < math.inf, (name, case)


def nvcc_flags(folder: Path, workdir: Path) -> list[str]:
    config = load_task(folder)["config"]
    flags = [*NVCC_FLAGS, "-I", str(workdir)]
    flags += [f"-I{workdir / d}" for d in config.get("include_dirs", [])]
    flags += [f"-D{k}={v}" for k, v in (config.get("defines") or {}).items()]
    return flags + list(config.get("compile_flags", []))


def nvcc(*args: str) -> None:
    assert NVCC is not None
    done = subprocess.run([NVCC, *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def driver_objects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[Path]]]:
    """Each CUDA leaderboard's files laid out once, its non-submission sources compiled once."""
    if NVCC is None:
        pytest.skip("nvcc is not installed")
    built = {}
    for folder in CU_FOLDERS:
        workdir = tmp_path_factory.mktemp(folder.name)
        task = load_task(folder)
        for entry in task["files"]:
            if entry["source"] != "@SUBMISSION@":
                shutil.copy(folder / entry["source"], workdir / entry["name"])
        submission = next(f["name"] for f in task["files"] if f["source"] == "@SUBMISSION@")
        objects = []
        for source in task["config"]["sources"]:
            if source != submission:
                target = workdir / (Path(source).stem + ".o")
                nvcc(*nvcc_flags(folder, workdir), "-c", str(workdir / source), "-o", str(target))
                objects.append(target)
        built[folder.name] = (workdir, objects)
    return built


@pytest.mark.slow  # nvcc: a few seconds per source
@pytest.mark.parametrize(
    ("folder", "source"),
    CU_SUBMISSIONS,
    ids=[p.relative_to(LEADERBOARDS).as_posix() for _, p in CU_SUBMISSIONS],
)
def test_cuda_submission_builds_with_the_driver(
    folder: Path, source: Path, driver_objects: dict[str, tuple[Path, list[Path]]], tmp_path: Path
) -> None:
    workdir, objects = driver_objects[folder.name]
    submission = tmp_path / "submission.o"
    nvcc(*nvcc_flags(folder, workdir), "-c", "-x", "cu", str(source), "-o", str(submission))
    binary = tmp_path / "kernelcup_eval"
    nvcc(*NVCC_FLAGS, *map(str, objects), str(submission), "-o", str(binary))
    # Without POPCORN_FD the driver refuses to start (GPU MODE's code 111): it needs no GPU.
    env = {k: v for k, v in os.environ.items() if k != "POPCORN_FD"}
    assert subprocess.run([str(binary), "test", "cases.txt"], env=env, timeout=60).returncode == 111
