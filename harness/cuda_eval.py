"""CUDA leaderboards (``lang: cu``): build with nvcc, run the driver binary, read its report.

The protocol (a GPU MODE superset) is written down in ``harness/NOTES.md`` (CUDA leaderboards):
the binary gets ``<mode> <cases-file>`` and reports ``key: value`` lines on the descriptor named
by ``POPCORN_FD``. Seeds in the cases file are already derived; the secret never leaves the
harness.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelcup.harness import compile as nvcc_build
from kernelcup.harness import scoring, stats, sysinfo
from kernelcup.harness.problem import ProblemError, Work
from kernelcup.harness.process import (
    StreamCapture,
    child_environment,
    describe_exit,
    kill_adopted_children,
    userns_prefix,
)
from kernelcup.harness.reporting import Emit, attach_output
from kernelcup.harness.seeds import SeedPlan
from kernelcup.harness.spec import Case, CaseResult, JobSpec, Mode, Progress, Result, Status
from kernelcup.harness.verdict import RunEnded, exception_in, format_seconds
from kernelcup.harness.workspace import Workspace

EXIT_TEST_FAIL = 112
MAX_REPORT = 4 << 20
_WORD = re.compile(r"[A-Za-z]+")


class Report(threading.Thread):
    """Reads the binary's ``key: value`` lines as they come (to name the running case)."""

    def __init__(self, fd: int) -> None:
        super().__init__(daemon=True)
        self._fd = fd
        self.values: dict[str, str] = {}
        self.order: list[str] = []
        self.rewritten: list[str] = []  # keys reported again with another value
        self.size = 0

    def run(self) -> None:
        with os.fdopen(self._fd, "rb", buffering=0) as stream:
            pending = b""
            while chunk := stream.read(1 << 16):
                self.size += len(chunk)
                if self.size > MAX_REPORT:
                    continue
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    self._take(line.decode("utf-8", errors="replace"))
            if pending:
                self._take(pending.decode("utf-8", errors="replace"))

    def _take(self, line: str) -> None:
        key, sep, value = line.partition(":")
        if sep:
            key, value = key.strip(), value.strip()
            if self.values.get(key, value) != value:
                self.rewritten.append(key)
            self.values[key] = value
            self.order.append(key)

    def running(self, kind: str) -> int | None:
        """Index of the last ``<kind>.<i>.spec`` without a status yet."""
        for key in reversed(self.order):
            match = re.fullmatch(rf"{kind}\.(\d+)\.spec", key)
            if match:
                index = int(match.group(1))
                return None if f"{kind}.{index}.status" in self.values else index
        return None


def case_line(case: Case) -> str:
    parts = []
    for key, value in case.items():
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, str) and _WORD.fullmatch(value))
        ):
            raise RunEnded(
                Status.ERROR,
                f"case value {key}={value!r} cannot be passed to a CUDA driver (integers or words only)",
            )
        parts.append(f"{key}: {value}")
    return "; ".join(parts)


def write_cases(workspace: Workspace, mode: str, cases: list[Case], serial: int) -> Path:
    """The cases file a driver reads: one ``name: value; ...`` line per case, readable by it."""
    cases_file = workspace.work / f"cases-{mode}-{serial}.txt"
    cases_file.write_text("\n".join(case_line(c) for c in cases))
    cases_file.chmod(0o644)
    return cases_file


def _run_binary(
    binary: Path,
    mode: str,
    cases: list[Case],
    workspace: Workspace,
    deadline: float,
    timeout_s: float,
    label: str,
    outputs: list[tuple[StreamCapture, StreamCapture]],
) -> dict[str, str]:
    cases_file = write_cases(workspace, mode, cases, len(outputs))
    read_fd, write_fd = os.pipe()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    identity = workspace.identity
    env = child_environment(workspace.home, {"POPCORN_FD": str(write_fd)})
    command = [*userns_prefix(identity), str(binary), mode, cases_file.name]
    passed: tuple[int, ...] = (write_fd,)
    if workspace.sandbox is not None:
        command = workspace.sandbox.wrap(command, workspace.work)
        passed += workspace.sandbox.pass_fds
    try:
        popen = subprocess.Popen(
            command,
            cwd=workspace.work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            pass_fds=passed,
            start_new_session=True,
            **identity.popen_credentials(),
        )
    finally:
        for fd in (write_fd, out_write, err_write):
            os.close(fd)
    report = Report(read_fd)
    stdout, stderr = StreamCapture(out_read), StreamCapture(err_read)
    for thread in (report, stdout, stderr):
        thread.start()
    outputs.append((stdout, stderr))

    def kill() -> None:
        os.killpg(popen.pid, signal.SIGKILL)

    return await_report(popen, report, kill, mode, deadline, timeout_s, label, "the CUDA program", stdout, stderr)


def await_report(
    popen: subprocess.Popen[bytes],
    report: Report,
    kill: Callable[[], None],
    mode: str,
    deadline: float,
    timeout_s: float,
    label: str,
    what: str,
    stdout: StreamCapture,
    stderr: StreamCapture,
) -> dict[str, str]:
    """Wait for a driver (``what``: "the CUDA program", "the leaderboard's evaluator") to end within
    the budget, and its report: the end of every run through the protocol, however it was started."""
    try:
        status = popen.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill()
        popen.wait()
        report.join(timeout=2)
        kind = "test" if mode == "test" else "benchmark"
        index = report.running(kind)
        where = f" in {kind} {index + 1} ({report.values.get(f'{kind}.{index}.spec', '')})" if index is not None else ""
        raise RunEnded(Status.TIMED_OUT, f"timed out after {timeout_s:.0f} s {label}{where}") from None
    finally:
        kill_adopted_children()
    report.join(timeout=5)
    stdout.join(timeout=2)
    stderr.join(timeout=2)
    if report.rewritten:
        # The driver states each result once. Submission and driver share one process (GPU
        # MODE's format compiles them together), so a second, different value is what a
        # submission writing its own report looks like.
        raise RunEnded(
            Status.FAILED,
            f"{what} reported {report.rewritten[0]!r} twice with different values {label}: "
            "something besides the driver wrote to the report (POPCORN_FD)",
        )
    if status not in (0, EXIT_TEST_FAIL) or "check" not in report.values:
        raise RunEnded(Status.CRASHED, f"{what} {describe_exit(status)} {label}{exception_in(stderr.text())}")
    return report.values


def _tests_from(report: dict[str, str], cases: list[Case]) -> list[CaseResult]:
    results = []
    for index, case in enumerate(cases):
        passed = report.get(f"test.{index}.status") == "pass"
        unreported = report.get("error") or "no status reported"  # a driver that gave up early
        message = "" if passed else report.get(f"test.{index}.error", unreported)
        results.append(CaseResult(case=case, passed=passed, message=message))
    return results


def _benchmark_from(
    report: dict[str, str], index: int, case: Case, label: str, what: str = "the CUDA program"
) -> CaseResult:
    prefix = f"benchmark.{index}"
    if report.get(f"{prefix}.status") == "fail" or report.get("check") != "pass":
        error = report.get(f"{prefix}.error") or report.get("test.0.error") or report.get("error") or "check failed"
        raise RunEnded(Status.FAILED, f"{label} failed: {error}")
    try:
        durations = [float(v) for v in report.get(f"{prefix}.durations", "").split(",") if v.strip()]
        if durations:
            summary = stats.summarize(durations)
            return stats.case_result(case, summary)
        mean = float(report[f"{prefix}.mean"])
        median = float(report.get(f"{prefix}.median", mean))
        return CaseResult(
            case=case,
            passed=True,
            message="" if f"{prefix}.median" in report else "median not reported: mean used",
            runs=int(float(report.get(f"{prefix}.runs", "0"))),
            median_ns=median,
            mean_ns=mean,
            min_ns=float(report[f"{prefix}.best"]) if f"{prefix}.best" in report else None,
            max_ns=float(report[f"{prefix}.worst"]) if f"{prefix}.worst" in report else None,
            std_ns=float(report[f"{prefix}.std"]) if f"{prefix}.std" in report else None,
        )
    except (KeyError, ValueError) as exc:
        raise RunEnded(Status.CRASHED, f"{label}: {what}'s report is incomplete ({exc})") from None


def run(spec: JobSpec, workspace: Workspace, result: Result, emit: Emit, deadline: float) -> None:
    emit(Progress("compiling"))
    build = nvcc_build.build(spec, workspace, deadline)
    kill_adopted_children()
    result.compile_log = build.log
    if build.binary is None:
        raise RunEnded(Status.COMPILE_ERROR, f"nvcc failed: {nvcc_build.first_error(build.log)}")
    import torch

    if spec.device == "cpu" or not torch.cuda.is_available():
        raise RunEnded(Status.ERROR, "compiled; CUDA leaderboards need a GPU to run, and none is present")
    if spec.mode is Mode.PROFILE:
        raise RunEnded(Status.ERROR, "profile mode is not available for CUDA leaderboards yet")
    from kernelcup.harness import sysinfo

    nvml = sysinfo.visible_nvml()
    info: dict[str, Any] = {"gpu": torch.cuda.get_device_name()}
    result.system = sysinfo.collect("cuda", info, nvml)
    result.system.isolation = workspace.isolation()
    seeds = SeedPlan(spec.secret_seed if spec.mode is Mode.RANKED else None)
    try:
        work = Work(spec.files.get("reference.py"))
    except ProblemError as exc:
        raise RunEnded(Status.ERROR, f"leaderboard error: {exc}") from None
    outputs: list[tuple[StreamCapture, StreamCapture]] = []
    binary = build.binary

    def drive(mode: str, cases: list[Case], label: str) -> dict[str, str]:
        return _run_binary(binary, mode, cases, workspace, deadline, spec.timeout_s, label, outputs)

    try:
        run_protocol(spec, result, emit, seeds, nvml, work, drive, "the CUDA program", ranked_case_by_case=True)
    finally:
        attach_outputs(result, outputs)


Drive = Callable[[str, list[Case], str], dict[str, str]]
"""Runs a driver in one mode on a list of cases (with a label for verdicts); its report."""


def run_protocol(
    spec: JobSpec,
    result: Result,
    emit: Emit,
    seeds: SeedPlan,
    nvml: Any,
    work: Work,
    drive: Drive,
    what: str,
    *,
    ranked_case_by_case: bool,
) -> None:
    """Tests, then (benchmark, ranked) timing through a driver that speaks the POPCORN protocol.

    ``ranked_case_by_case``: run ``leaderboard`` once per benchmark case (GPU MODE's CUDA
    drivers time only the last case of that mode's file); otherwise once with every case.
    """
    tests = [seeds.case(case, "test") for case in spec.task.tests]
    emit(Progress("testing", 0, len(tests)))
    report = drive("test", tests, "while testing")
    result.tests = _tests_from(report, tests)
    emit(Progress("testing", len(tests), len(tests)))
    failed = [(i, t) for i, t in enumerate(result.tests) if not t.passed]
    if failed:
        index, test = failed[0]
        raise RunEnded(
            Status.FAILED,
            f"test {index + 1} of {len(tests)} ({case_line(test.case)}) failed: {test.message}",
        )
    if spec.mode is Mode.TEST:
        result.status, result.verdict = Status.PASSED, f"all {len(tests)} tests passed"
        return
    cases = spec.task.benchmarks
    if not cases:
        raise RunEnded(Status.ERROR, "the leaderboard defines no benchmarks")

    def time_cases() -> None:
        if spec.mode is Mode.RANKED and ranked_case_by_case:
            for index, case in enumerate(cases):
                label = f"in benchmark {index + 1} of {len(cases)}"
                report = drive("leaderboard", [seeds.case(case, "bench")], label)
                result.benchmarks.append(_benchmark_from(report, 0, case, label, what))
                emit(Progress("benchmarking", index + 1, len(cases)))
        else:
            mode, listed = ("benchmark", cases)
            if spec.mode is Mode.RANKED:
                mode, listed = ("leaderboard", [seeds.case(case, "bench") for case in cases])
            report = drive(mode, listed, "while benchmarking")
            for index, case in enumerate(cases):
                label = f"benchmark {index + 1} of {len(cases)}"
                result.benchmarks.append(_benchmark_from(report, index, case, label, what))
            emit(Progress("benchmarking", len(cases), len(cases)))

    if nvml is not None:
        result.system.sm_clock_mhz_before = nvml.sm_clock_mhz()
    emit(Progress("benchmarking", 0, len(cases)))
    with sysinfo.watching(nvml, result.system):
        time_cases()
    if nvml is not None:
        result.system.sm_clock_mhz_after = nvml.sm_clock_mhz()
    _check_floor(result.benchmarks, work, spec)
    medians = [(b.median_ns or 0.0) * 1e-9 for b in result.benchmarks]
    score_s = scoring.score(result, spec.task.ranking_by, medians)
    result.status = Status.PASSED
    what_score = "ranked score" if spec.mode is Mode.RANKED else "score"
    result.verdict = (
        f"all {len(tests)} tests passed; {what_score} {format_seconds(score_s)} "
        f"({spec.task.ranking_by} of {len(medians)} benchmark medians)"
    )


def _check_floor(benchmarks: list[CaseResult], work: Work, spec: JobSpec) -> None:
    """GB/s, TFLOP/s and % of peak where the leaderboard gives flops/bytes; a median below the
    physical floor fails the run, as it does for Python leaderboards."""
    if work.module is None:
        return
    import torch

    from kernelcup.harness import benchmark

    l2_bytes = int(getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 0)
    for index, case in enumerate(benchmarks):
        label = f"benchmark {index + 1} of {len(benchmarks)} ({case_line(case.case)})"
        try:
            benchmark.roofline(case, work, case.case, spec.gpu, "cuda", label, l2_bytes)
        except ProblemError as exc:
            raise RunEnded(Status.ERROR, f"leaderboard error: {exc}") from None


def attach_outputs(result: Result, outputs: list[tuple[StreamCapture, StreamCapture]]) -> None:
    if not outputs:
        return
    merged_out, merged_err = StreamCapture(-1), StreamCapture(-1)
    for stdout, stderr in outputs:
        merged_out.kept += stdout.kept
        merged_out.dropped += stdout.dropped
        merged_err.kept += stderr.kept
        merged_err.dropped += stderr.dropped
    attach_output(result, merged_out, merged_err)
