"""``python -m tests.runners.scripted_harness SCRIPT``: plays ``python -m kernelcup.harness`` for
the Modal tests' GPU functions (``modal_functions.scripted_job``), which have no GPU: reads the
job spec on stdin, prints the script's progress lines, waits at its gate, then prints one result
line signed with the spec's key (or the script's, a forgery), or dies as the script says."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kernelcup.harness.spec import Mode, Progress, Result, Status, SystemInfo, progress_line, result_line


@dataclass
class Script:
    progress: list[tuple[str, int, int]] = field(default_factory=list)
    gate: str | None = None  # a file whose creation lets the harness finish (never created: it hangs)
    gpu: str = "NVIDIA H100 80GB HBM3"
    ranks: list[str] = field(default_factory=list)  # a multi-GPU job: which card ran which rank
    key: str | None = None  # sign with this key instead of the spec's
    die_saying: str | None = None  # write this to stderr, then die of SIGKILL without a result
    pid_file: str | None = None  # where the harness writes its process id

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def main(script: Script) -> int:
    spec = json.loads(sys.stdin.read())
    if script.pid_file:
        # Written whole, then renamed: a reader that sees the file sees the number.
        partial = Path(script.pid_file + ".partial")
        partial.write_text(str(os.getpid()))
        partial.rename(script.pid_file)
    for phase, done, total in script.progress:
        print(progress_line(Progress(phase, done, total)), flush=True)
    while script.gate and not Path(script.gate).exists():
        time.sleep(0.01)
    if script.die_saying is not None:
        sys.stderr.write(script.die_saying)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    result = Result(spec["job_id"], Mode(spec["mode"]), Status.PASSED, "all tests passed", score_s=1e-3,
                    system=SystemInfo(device="cuda", gpu=script.gpu, ranks=script.ranks))
    print(result_line(result, script.key or spec["result_key"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(Script(**json.loads(sys.argv[1]))))
