"""Profile mode: a per-kernel Nsight Compute summary when ncu is present, torch.profiler otherwise.

Runs after the tests passed, in a fresh process per profiler run. ncu is started with
``--clock-control none`` (never change the card's clocks) and profiles only the one call
between ``cudaProfilerStart`` and ``cudaProfilerStop`` per case, in the job's sandbox as the
job's user (without the sandbox, with the harness's uid: reading GPU counters needs it); where
the driver keeps the counters for administrators, torch.profiler is used instead. There is no
secret in profile mode.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

from kernelcup.harness.process import PYTHON_FLAGS, StreamCapture, child_environment, kill_adopted_children
from kernelcup.harness.reporting import Emit, attach_output
from kernelcup.harness.spec import CaseResult, JobSpec, Progress, Result, Status
from kernelcup.harness.verdict import RunEnded
from kernelcup.harness.workspace import Workspace

MAX_REPORT = 1 << 20
NCU_METRICS = (
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
)


def read_child_file(directory: Path, name: str, limit: int = MAX_REPORT) -> str:
    """Read a file the child wrote, refusing symlinks (it could point one at a secret)."""
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            raise OSError(f"{name} is not a regular file")
        data = stream.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    return text + ("\n[... truncated]" if len(data) > limit else "")


def _run(
    command: list[str], workspace: Workspace, deadline: float, timeout_s: float, user: bool
) -> tuple[int, StreamCapture, StreamCapture]:
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    identity = workspace.identity
    passed: tuple[int, ...] = ()
    if workspace.sandbox is not None:  # ncu too: it runs the submission's code
        command = workspace.sandbox.wrap(command, workspace.work)
        passed = workspace.sandbox.pass_fds
    credentials = identity.popen_credentials() if user else {}
    try:
        popen = subprocess.Popen(
            command,
            cwd=workspace.work,
            env=child_environment(workspace.home, {}),
            stdin=subprocess.DEVNULL,
            stdout=out_write,
            stderr=err_write,
            pass_fds=passed,
            start_new_session=True,
            **credentials,
        )
    finally:
        os.close(out_write)
        os.close(err_write)
    stdout, stderr = StreamCapture(out_read), StreamCapture(err_read)
    stdout.start()
    stderr.start()
    try:
        status = popen.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(popen.pid, 9)
        popen.wait()
        raise RunEnded(Status.TIMED_OUT, f"timed out after {timeout_s:.0f} s while profiling") from None
    finally:
        kill_adopted_children()
    stdout.join(timeout=2)
    stderr.join(timeout=2)
    return status, stdout, stderr


def _child_command(
    spec: JobSpec,
    workspace: Workspace,
    cases_file: Path,
    out: Path,
    device: str,
    tool: str,
    only: str,
) -> list[str]:
    userns = "1" if workspace.identity.userns and tool != "ncu" and workspace.sandbox is None else "0"
    return [
        sys.executable,
        *PYTHON_FLAGS,
        "-m",
        "kernelcup.harness.profile_child",
        str(workspace.work),
        spec.submission_name,
        str(cases_file),
        str(out),
        device,
        tool,
        only,
        userns,
        # Under ncu the parent is ncu, not the harness: "0" skips the parent check (ncu dies
        # with the harness's process group, and takes this process with it).
        str(os.getpid()) if tool != "ncu" and workspace.sandbox is None else "0",
    ]


def _ncu_summary(csv_text: str) -> tuple[str, float]:
    """One line per kernel from ncu's raw CSV page, and the total GPU time in ns."""
    rows = [row for row in csv.reader(io.StringIO(csv_text)) if row]
    header_at = next((i for i, row in enumerate(rows) if "Kernel Name" in row), None)
    if header_at is None:
        return "no kernels were profiled", 0.0
    header = rows[header_at]
    lines, total = [], 0.0
    for row in rows[header_at + 1 :]:
        if len(row) != len(header) or not row[header.index("Kernel Name")]:
            continue
        record = dict(zip(header, row, strict=True))
        try:
            duration = float(record.get("gpu__time_duration.sum", "nan").replace(",", ""))
        except ValueError:
            continue  # the units row
        total += duration
        lines.append(
            f"{record['Kernel Name'][:80]}: {duration / 1000:.2f} µs, DRAM "
            f"{record.get(NCU_METRICS[1], '?')}% , SM {record.get(NCU_METRICS[2], '?')}%"
        )
    return "; ".join(lines) or "no kernels were profiled", total


def run(spec: JobSpec, workspace: Workspace, result: Result, emit: Emit, deadline: float, device: str) -> None:
    cases = spec.task.benchmarks
    if not cases:
        raise RunEnded(Status.ERROR, "the leaderboard defines no benchmarks to profile")
    cases_file = workspace.work / "profile_cases.json"  # public cases; the sandbox sees work/
    cases_file.write_text(json.dumps(cases))
    cases_file.chmod(0o644)
    out = workspace.work / "profile"
    out.mkdir(exist_ok=True)
    workspace.give_to_child(out)
    ncu = shutil.which("ncu") if device == "cuda" else None
    emit(Progress("profiling", 0, len(cases)))
    outputs: list[tuple[StreamCapture, StreamCapture]] = []
    try:
        if ncu:
            try:
                _profile_ncu(ncu, spec, workspace, result, emit, deadline, cases_file, out, outputs)
                tool = "Nsight Compute"
            except CountersClosed as closed:
                result.files["ncu_unavailable.txt"] = str(closed)
                result.benchmarks.clear()
                ncu = None
        if not ncu:
            command = _child_command(spec, workspace, cases_file, out, device, "torch", "all")
            status, stdout, stderr = _run(command, workspace, deadline, spec.timeout_s, user=True)
            outputs.append((stdout, stderr))
            if status != 0:
                raise RunEnded(
                    Status.CRASHED,
                    f"the submission's process failed while profiling (exit {status})",
                )
            for index, case in enumerate(cases):
                name = f"profile_{index}.txt"
                try:
                    table = read_child_file(out, name)
                except OSError as exc:
                    raise RunEnded(Status.CRASHED, f"no profile was written for benchmark {index + 1}: {exc}") from None
                result.files[name] = table
                result.benchmarks.append(CaseResult(case=case, passed=True, message=f"torch.profiler table in {name}"))
                emit(Progress("profiling", index + 1, len(cases)))
            tool = "torch.profiler"
    finally:
        for stdout, stderr in outputs[-1:]:
            attach_output(result, stdout, stderr)
    result.status = Status.PASSED
    result.verdict = (
        f"all {len(result.tests)} tests passed; profiled {len(cases)} benchmarks with {tool} (reports in files)"
    )
    if "ncu_unavailable.txt" in result.files:
        result.verdict += "; Nsight Compute could not read the GPU's counters here (see ncu_unavailable.txt)"


class CountersClosed(Exception):
    """ncu may not read the GPU's counters here: the profile falls back to torch.profiler."""


def _profile_ncu(
    ncu: str,
    spec: JobSpec,
    workspace: Workspace,
    result: Result,
    emit: Emit,
    deadline: float,
    cases_file: Path,
    out: Path,
    outputs: list[tuple[StreamCapture, StreamCapture]],
) -> None:
    reports = workspace.home / "ncu"  # written by ncu in the sandbox
    reports.mkdir(exist_ok=True)
    workspace.give_to_child(reports)
    for index, case in enumerate(spec.task.benchmarks):
        report = reports / f"case_{index}"
        command = [
            ncu,
            "--clock-control",
            "none",
            "--profile-from-start",
            "off",
            "--target-processes",
            "all",
            "--set",
            "basic",
            "--metrics",
            ",".join(NCU_METRICS),
            "-f",
            "-o",
            str(report),
            *_child_command(spec, workspace, cases_file, out, "cuda", "ncu", str(index)),
        ]
        status, stdout, stderr = _run(command, workspace, deadline, spec.timeout_s, user=False)
        outputs.append((stdout, stderr))
        said = stdout.text() + stderr.text()
        if status != 0 and "ERR_NVGPUCTRPERM" in said:
            raise CountersClosed(
                "Nsight Compute cannot read this GPU's performance counters as the sandboxed user "
                "(the driver keeps them for administrators: NVreg_RestrictProfilingToAdminUsers=1); "
                "torch.profiler was used instead.\n\n" + said[-4000:]
            )
        if status != 0:
            raise RunEnded(
                Status.CRASHED,
                f"the submission's process failed under ncu on benchmark {index + 1} (exit {status})",
            )
        rep = f"{report}.ncu-rep"
        importing = [ncu, "--import", rep, "--csv", "--page", "raw", "--metrics", ",".join(NCU_METRICS)]
        details_command = [ncu, "--import", rep, "--page", "details"]
        passed: tuple[int, ...] = ()
        if workspace.sandbox is not None:  # the report was written where the submission could change it
            importing = workspace.sandbox.wrap(importing, workspace.work)
            details_command = workspace.sandbox.wrap(details_command, workspace.work)
            passed = workspace.sandbox.pass_fds
        raw = subprocess.run(importing, capture_output=True, text=True, timeout=120, pass_fds=passed)
        details = subprocess.run(details_command, capture_output=True, text=True, timeout=120, pass_fds=passed)
        summary, total_ns = _ncu_summary(raw.stdout)
        result.files[f"ncu_{index}.txt"] = details.stdout[:MAX_REPORT]
        result.files[f"ncu_{index}.csv"] = raw.stdout[:MAX_REPORT]
        result.benchmarks.append(
            CaseResult(case=case, passed=True, message=summary, runs=1, median_ns=total_ns or None)
        )
        emit(Progress("profiling", index + 1, len(spec.task.benchmarks)))
