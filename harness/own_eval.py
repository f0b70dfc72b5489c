"""Python leaderboards with their own evaluator (task.yml's ``main``), through POPCORN_FD.

Such a leaderboard's ``eval.py`` generates its inputs, calls the submission and times it
itself (``harness/evaluators.py`` tells it from GPU MODE's standard one). The harness runs it
as GPU MODE does, ``python <main> <mode> <cases-file>`` in the folder holding the leaderboard's
files and the submission, with ``POPCORN_FD`` naming the descriptor it reports on, and reads
the report with the CUDA drivers' parser (``harness/cuda_eval.py``): the same protocol, the
same verdicts. The evaluator imports the submission, so it starts like every process that
runs submitted code: through ``harness/process.py``, in the job's sandbox.

Seeds travel only in the cases file: the public ones, or in ranked mode ones derived from the
secret (``harness/seeds.py``); ``POPCORN_SEED`` is never set, and an evaluator that draws its
own seeds keeps doing so. Like a CUDA driver, the evaluator times the submission in its own
process, so its report is only as honest as that process (harness/NOTES.md, CUDA leaderboards,
"Known limit").
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
import shutil
import sys
from typing import Any

from kernelcup.harness import cuda_eval, sysinfo
from kernelcup.harness.problem import Work
from kernelcup.harness.process import StreamCapture, child_environment, spawn, userns_prefix
from kernelcup.harness.reporting import Emit
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.spec import Case, CaseResult, JobSpec, Mode, Progress, Result, Status
from kernelcup.harness.verdict import RunEnded
from kernelcup.harness.workspace import Workspace, build_cache_env

WHAT = "the leaderboard's evaluator"
PROFILE_ALTCHARS = b"+*"  # GPU MODE's eval encodes its profiler tables with these


def run(spec: JobSpec, workspace: Workspace, result: Result, emit: Emit, deadline: float) -> None:
    if spec.task.main not in spec.files:
        raise RunEnded(Status.ERROR, f"task.yml names its evaluator {spec.task.main!r}, which is not among its files")
    import torch

    device = "cuda" if spec.device != "cpu" and torch.cuda.is_available() else "cpu"
    nvml = None
    info: dict[str, Any] = {}
    if device == "cuda":
        nvml = sysinfo.visible_nvml()
        info["gpu"] = torch.cuda.get_device_name()
    result.system = sysinfo.collect(device, info, nvml)
    result.system.isolation = workspace.isolation()
    seeds = SeedPlan(spec.secret_seed if spec.mode is Mode.RANKED else None)
    extra = build_cache_env(spec, workspace)
    if device == "cpu":
        extra["CUDA_VISIBLE_DEVICES"] = ""  # a CPU job stays on the CPU of a GPU machine
    outputs: list[tuple[StreamCapture, StreamCapture]] = []

    def drive(mode: str, cases: list[Case], label: str) -> dict[str, str]:
        cases_file = cuda_eval.write_cases(workspace, mode, cases, len(outputs))
        # The report goes over the socket spawn() gives every child; its number is known only
        # there ({fd}), so `env` puts it into the evaluator's environment.
        command = [
            *userns_prefix(workspace.identity),
            shutil.which("env") or "/usr/bin/env",
            "POPCORN_FD={fd}",
            sys.executable,
            "-s",  # no user site folder (process.PYTHON_FLAGS); its own folder stays on sys.path: it imports from there
            spec.task.main,
            mode,
            cases_file.name,
        ]
        env = child_environment(workspace.home, extra)
        child = spawn(command, workspace.work, workspace.identity, env, workspace.sandbox)
        outputs.append((child.stdout, child.stderr))
        report = cuda_eval.Report(os.dup(child.channel.fileno()))
        report.start()
        try:
            streams = (child.stdout, child.stderr)
            limit = (deadline, spec.timeout_s)
            return cuda_eval.await_report(child.popen, report, child.finish, mode, *limit, label, WHAT, *streams)
        finally:
            child.finish()

    try:
        if spec.mode is Mode.PROFILE:
            _profile(spec, result, emit, seeds, drive)
            return
        cuda_eval.run_protocol(spec, result, emit, seeds, nvml, Work(None), drive, WHAT, ranked_case_by_case=False)
    finally:
        cuda_eval.attach_outputs(result, outputs)


def _profile(spec: JobSpec, result: Result, emit: Emit, seeds: SeedPlan, drive: cuda_eval.Drive) -> None:
    """Tests, then the evaluator's ``profile`` mode where it has one (GPU MODE's writes a
    torch.profiler table per benchmark, base64-encoded, as ``benchmark.<i>.report``)."""
    cases = spec.task.benchmarks
    if not cases:
        raise RunEnded(Status.ERROR, "the leaderboard defines no benchmarks to profile")
    test_only = dataclasses.replace(spec, mode=Mode.TEST)
    cuda_eval.run_protocol(test_only, result, emit, seeds, None, Work(None), drive, WHAT, ranked_case_by_case=False)
    emit(Progress("profiling", 0, len(cases)))
    try:
        report = drive("profile", cases, "while profiling")
    except RunEnded as ended:
        if ended.status is not Status.CRASHED:
            raise
        report = {}
    tables = {}
    for index in range(len(cases)):
        encoded = report.get(f"benchmark.{index}.report")
        if encoded is None:
            continue
        try:
            tables[index] = base64.b64decode(encoded, altchars=PROFILE_ALTCHARS).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError):
            tables[index] = encoded
    if not tables:
        raise RunEnded(
            Status.ERROR,
            f"all {len(result.tests)} tests passed; {WHAT} has no profile mode (its report holds no profile)",
        )
    for index, case in enumerate(cases):
        name = f"profile_{index}.txt"
        if index in tables:
            result.files[name] = tables[index]
        result.benchmarks.append(
            CaseResult(case=case, passed=index in tables, message=f"profile in {name}" if index in tables else "")
        )
    emit(Progress("profiling", len(cases), len(cases)))
    result.status = Status.PASSED
    result.verdict = f"all {len(result.tests)} tests passed; profiled {len(tables)} benchmarks with {WHAT}"
