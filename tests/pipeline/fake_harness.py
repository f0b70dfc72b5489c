"""A stand-in for ``python -m kernelcup.harness`` that speaks the real wire contract (kernelcup.harness.spec).

Usage: ``python fake_harness.py BEHAVIOUR [PIDFILE] [SECONDS]``. It exists so the local runner
and the pipeline are tested against a real subprocess that misbehaves on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from kernelcup.harness.spec import JobSpec, Progress, Result, Status, progress_line, result_line


def say(line: str) -> None:
    print(line, flush=True)


def main() -> None:
    behaviour = sys.argv[1]
    pidfile = sys.argv[2] if len(sys.argv) > 2 else ""
    seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
    spec = JobSpec.from_json(sys.stdin.read())
    result = Result(spec.job_id, spec.mode, Status.PASSED, "all tests passed", score_s=0.001)
    pids = [os.getpid()]
    if behaviour == "hang":  # a submission child that would outlive a careless kill
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pids.append(child.pid)
    if pidfile:
        with open(pidfile + ".tmp", "w") as out:
            out.write(" ".join(map(str, pids)))
        os.replace(pidfile + ".tmp", pidfile)
    say("not json: a stray line the runner ignores")
    say(progress_line(Progress("compiling")))
    for done in range(1, 3):
        say(progress_line(Progress("testing", done, 2)))
    if behaviour in ("slow", "hang"):
        time.sleep(seconds if behaviour == "slow" else 600)
    if behaviour == "crash":
        print("Traceback (most recent call last):\nRuntimeError: boom", file=sys.stderr)
        sys.exit(3)
    if behaviour == "badmac":
        say(result_line(result, "00" * 32))
        return
    if behaviour == "env":
        result.stdout = json.dumps(dict(os.environ))
    if behaviour == "pid":  # which process served the job (standby tests)
        result.stdout = str(os.getpid())
    if behaviour == "cards":  # which cards the job got, and when it held them
        began = time.time()
        time.sleep(seconds)
        cards = {"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "began": began, "ended": time.time(),
                 "pid": os.getpid()}
        result.stdout = json.dumps(cards)
    if behaviour == "timeout":
        result.status, result.verdict = Status.TIMED_OUT, "the tests ran past 5 s"
    say(result_line(result, spec.result_key))


if __name__ == "__main__":
    main()
