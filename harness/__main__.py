"""``python -m kernelcup.harness``: one job spec on stdin, progress lines and one signed result on stdout.

Whatever happens (a broken spec, a bug in the harness, SIGTERM from the runner), the last
line is a signed result; only SIGKILL can prevent it. Nothing else writes to this stdout: the
submission's process has its own pipes, and is dead before the result line is written.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from types import FrameType
from typing import TextIO

from kernelcup.harness import cpus
from kernelcup.harness.process import WATCHDOG_ENV, harden_harness_process, keep_bytecode
from kernelcup.harness.run import Prepared
from kernelcup.harness.spec import (
    JobSpec,
    Mode,
    Progress,
    Result,
    SpecError,
    Status,
    progress_line,
    result_line,
)


def _arm_watchdog() -> None:
    """Debugging aid for hangs on a new machine: every thread's stack to stderr after N s."""
    seconds = os.environ.get(WATCHDOG_ENV)
    if seconds:
        faulthandler.dump_traceback_later(float(seconds) * 1.5, exit=False, file=sys.stderr)


class Terminated(Exception):
    pass


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"the harness received signal {signum}")


def _unsigned_key(raw: str) -> tuple[str, str, Mode]:
    """Best effort to reply to a spec that does not parse: its key, job id and mode."""
    try:
        data = json.loads(raw)
        key = str(data.get("result_key", ""))
        bytes.fromhex(key)
        return key, str(data.get("job_id", "")), Mode(data.get("mode", "test"))
    except (ValueError, TypeError, AttributeError):
        return "", "", Mode.TEST


def _prepare() -> Prepared | None:
    """Start the submission's process and import torch while the spec has not come yet.

    Everything here is job-independent, so a runner can start the harness before it has a job
    (a standby) and the job finds both processes warm. A failure here is reported with the job.
    """
    try:
        from kernelcup.harness.run import prepare

        prepared = prepare()
        import kernelcup.harness.session  # noqa: F401  (torch, in parallel with the child's import)
    except Exception:
        return None
    if _start_cuda():
        prepared.warming = threading.Thread(target=_warm_imports, name="kernelcup-warm-imports", daemon=True)
        prepared.warming.start()
    return prepared


def _start_cuda() -> bool:
    """Create the harness's own CUDA context (it makes the inputs and checks the outputs on the
    GPU) while the child starts, rather than at the first test; False where there is no GPU."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.init()  # type: ignore[no-untyped-call]
            torch.empty(1, device="cuda")
            return True
    except Exception:
        pass  # the job meets the same failure where it first needs the GPU, and reports it there
    return False


# Imported by many leaderboards' checks, not by torch itself: GPU MODE's references call
# torch.use_deterministic_algorithms, which imports torch._inductor (with torch._dynamo and
# sympy), seconds that would land in a job's first test (JOURNAL.md, Bytecode). A standby
# harness imports them before its job; a harness started with its job, beside the submission's
# process starting, and the job waits for them before its own imports (harness/run.py).
WARM_IMPORTS = ("torch._inductor.config",)


def _warm_imports() -> None:
    for name in WARM_IMPORTS:
        try:
            importlib.import_module(name)
        except Exception:
            return  # the check that needs it meets the same failure and reports it


def main(stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> int:
    harden_harness_process()
    keep_bytecode()  # before torch is imported
    cpus.keep_off_timing_cores()  # before any thread or process is started (harness/cpus.py)
    _arm_watchdog()
    signal.signal(signal.SIGTERM, _on_sigterm)
    prepared = _prepare()
    raw = stdin.read()
    started = time.monotonic()  # the job's budget counts from its spec, not from a standby's start
    key, job_id, mode = _unsigned_key(raw)

    def emit(event: Progress) -> None:
        stdout.write(progress_line(event) + "\n")
        stdout.flush()

    try:
        spec = JobSpec.from_json(raw)
        key, job_id, mode = spec.result_key, spec.job_id, spec.mode
        bytes.fromhex(key)
        from kernelcup.harness.run import run_job

        result = run_job(spec, emit, started, prepared)
    except (SpecError, ValueError) as exc:
        result = Result(job_id=job_id, mode=mode, status=Status.ERROR, verdict=f"bad job spec: {exc}")
    except Terminated as exc:
        result = Result(job_id=job_id, mode=mode, status=Status.ERROR, verdict=str(exc))
    except BaseException as exc:
        result = Result(
            job_id=job_id,
            mode=mode,
            status=Status.ERROR,
            verdict=f"harness error: {type(exc).__name__}: {exc}",
            files={"harness_traceback.txt": traceback.format_exc()},
        )
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if prepared is not None:  # a spec that did not parse never reached run_job
        prepared.discard_child()
        if prepared.workspace is not None:
            prepared.workspace.cleanup()
    result.duration_s = time.monotonic() - started
    stdout.write(result_line(result, key) + "\n")
    stdout.flush()
    return 0


TEARDOWN_ENV = "KERNELCUP_HARNESS_TEARDOWN"


def _end_now(code: int) -> None:
    """End the process as soon as its result is written, without the interpreter's teardown.

    A runner reads the harness's output to its end (a second result line refuses the job), so
    the interpreter's teardown (torch's and CUDA's finalizers, module clean-up, joining threads)
    would be in every job's time, about as long as a short job's own work (JOURNAL.md, The
    harness's own exit). Nothing is left to finish by then: the submission's processes
    are ended, the workspace removed and the build caches copied back. A thread that a
    leaderboard's code started in this process ends with it, so it cannot write after the
    result. ``KERNELCUP_HARNESS_TEARDOWN=full`` keeps the normal exit (a profiler of the harness
    writes its report then)."""
    if os.environ.get(TEARDOWN_ENV) == "full":
        sys.exit(code)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    _end_now(main())
