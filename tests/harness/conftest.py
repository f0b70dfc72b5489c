"""Helpers for the harness tests: build job specs from leaderboard folders, run the harness.

``leaderboard_spec`` reads a task.yml the way the core does (pyyaml here; the harness itself
never parses YAML). It is the single place to swap for the core's loader later.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kernelcup.harness.spec import GpuInfo, JobSpec, Mode, Progress, Result, TaskConfig, parse_line

REPO = Path(__file__).resolve().parents[2]
# The GPU script reruns these tests with KERNELCUP_TEST_DEVICE=cuda; CI runs them on the CPU.
DEVICE = os.environ.get("KERNELCUP_TEST_DEVICE", "cpu")
FIXTURES = Path(__file__).resolve().parent / "fixtures"
LEADERBOARDS = FIXTURES / "leaderboards"
SUBMISSIONS = FIXTURES / "submissions"


def leaderboard_spec(
    folder: Path,
    submission: str,
    mode: Mode | str = Mode.TEST,
    *,
    timeout_s: float | None = None,
    device: str | None = None,
    secret_seed: int | None = None,
    gpu: GpuInfo | None = None,
    job_id: str = "job-1",
) -> JobSpec:
    """A job spec for ``submission`` (source text) on the leaderboard in ``folder``."""
    mode = Mode(mode)
    task = yaml.safe_load((folder / "task.yml").read_text())
    files: dict[str, str] = {}
    submission_name = "submission.py"
    for entry in task.get("files", []):
        if entry["source"] == "@SUBMISSION@":
            submission_name = entry["name"]
            files[entry["name"]] = submission
        else:
            files[entry["name"]] = (folder / entry["source"]).read_text()
    config = task.get("config", {}) or {}
    ranks = _world_size(task)
    device = device or DEVICE
    if ranks and device == "cuda" and not _enough_gpus(ranks):
        device = "cpu"  # a GPU rerun on a machine with fewer cards runs the multi-GPU ones with gloo
    timeouts = {
        Mode.TEST: task.get("test_timeout", 180),
        Mode.BENCHMARK: task.get("benchmark_timeout", 180),
        Mode.RANKED: task.get("ranked_timeout", 180),
        Mode.PROFILE: task.get("benchmark_timeout", 180),
    }
    return JobSpec(
        job_id=job_id,
        mode=mode,
        task=TaskConfig(
            lang=task.get("lang", "py"),
            main=config.get("main", "eval.py"),
            sources=list(config.get("sources", [])),
            include_dirs=list(config.get("include_dirs", [])),
            defines={str(k): str(v) for k, v in (config.get("defines") or {}).items()},
            compile_flags=list(config.get("compile_flags", [])),
            tests=list(task.get("tests", [])),
            # As the bot builds a CPU job's spec (core/leaderboards/tasks.py task_config).
            benchmarks=list(task.get("cpu_benchmarks" if device == "cpu" and task.get("cpu_benchmarks")
                                     else "benchmarks", [])),
            ranking_by=task.get("ranking_by", "last"),
            world_size=ranks,
        ),
        files=files,
        submission_name=submission_name,
        timeout_s=float(timeout_s if timeout_s is not None else timeouts[mode]),
        device=device,
        gpu=gpu or GpuInfo(),
        secret_seed=secret_seed if mode is Mode.RANKED else None,
        result_key=secrets.token_hex(32),
    )


def _enough_gpus(count: int) -> bool:
    import torch

    return torch.cuda.device_count() >= count


def _world_size(task: dict[str, Any]) -> int:
    """A multi-GPU leaderboard's ranks (the cases' ``world_size``); 0 for a single-GPU one."""
    if not task.get("multi_gpu"):
        return 0
    return max(int(case.get("world_size", 1)) for case in [*task.get("tests", []), *task.get("benchmarks", [])])


@dataclass
class HarnessRun:
    result: Result | None
    progress: list[Progress] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    stderr: str = ""
    returncode: int = 0
    rejected: list[str] = field(default_factory=list)  # lines whose MAC did not verify

    def outcome(self) -> Result:
        assert self.result is not None, f"no result line; stderr:\n{self.stderr}"
        return self.result


# Rounds' processes start ahead only on a box of 8 cores or more (harness/children.py): the tests
# that read which process ran what expect the same order on any box, and those of starting ahead
# ask for it (test_harness_prestart.py).
HARNESS_DEFAULTS = {"KERNELCUP_HARNESS_PRESTART": "0"}


def start_harness(env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m kernelcup.harness`` as a runner starts it: waiting for its spec on stdin."""
    return subprocess.Popen(
        [sys.executable, "-m", "kernelcup.harness"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**HARNESS_DEFAULTS, **os.environ, **(env or {})},
    )


def read_run(stdout: str, stderr: str, returncode: int, key: str) -> HarnessRun:
    """What a harness printed: its progress and its one result line, each checked with ``key``."""
    from kernelcup.harness.spec import SpecError

    run = HarnessRun(None, stderr=stderr, returncode=returncode)
    for line in stdout.splitlines():
        run.lines.append(line)
        try:
            parsed = parse_line(line, key)
        except SpecError:
            run.rejected.append(line)
            continue
        if isinstance(parsed, Progress):
            run.progress.append(parsed)
        elif isinstance(parsed, Result):
            assert run.result is None, "more than one valid result line"
            run.result = parsed
    return run


def run_harness(
    spec: JobSpec, *, wall_limit_s: float | None = None, env: dict[str, str] | None = None, overhead_s: float = 30.0
) -> HarnessRun:
    """Run ``python -m kernelcup.harness`` as the runner does and parse what it prints; by default
    within the spec's limit and ``overhead_s`` (the harness's own start, before it reads the spec
    and the job's clock starts, and its end)."""
    process = start_harness(env)
    try:
        stdout, stderr = process.communicate(
            spec.to_json(), timeout=wall_limit_s if wall_limit_s is not None else spec.timeout_s + overhead_s
        )
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    return read_run(stdout, stderr, process.returncode, spec.result_key)


def submission(name: str) -> str:
    path = SUBMISSIONS / name
    return (path if path.exists() else path.with_name(name + ".txt")).read_text()


def result_json(result: Result) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(result.to_json())
    return parsed


def run_many(specs: dict[str, JobSpec], workers: int = 3, overhead_s: float = 30.0) -> dict[str, HarnessRun]:
    """Run several harness jobs at once (each its own ``python -m kernelcup.harness``) to save wall
    time; each within its limit and ``overhead_s`` (``run_harness``)."""
    from concurrent.futures import ThreadPoolExecutor

    # Jobs side by side on one GPU would all pin their calling threads to the same core
    # (harness/cpus.py, made for the runner's one job per GPU): unpinned, they share them all.
    env = {"KERNELCUP_HARNESS_CPUS": "off"} if workers > 1 and len(specs) > 1 else None
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {name: pool.submit(run_harness, spec, env=env, overhead_s=overhead_s) for name, spec in specs.items()}
        return {name: future.result() for name, future in futures.items()}


def processes_named(marker: str) -> list[int]:
    """Live processes named ``marker`` (PR_SET_NAME), wherever their PID namespace is."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            named = entry.name.isdigit() and (entry / "comm").read_text().strip() == marker
            if named and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found
