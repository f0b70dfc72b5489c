"""``python -m kernelcup.harness.rank_launcher``: starts the ranks of a multi-GPU job inside its sandbox.

The sandbox runs one command as the init of its namespaces; for a multi-GPU job that command
is this launcher, so every rank lives in the same sandbox (one network namespace: the ranks
reach each other on loopback, and nothing else). Each rank is ``kernelcup.harness.child`` with its own
socket to the harness and its own output pipes, all passed in by the harness. The launcher
reports each rank's exit status on its control socket, one JSON line per rank, and exits when
every rank has; when it dies, every rank dies with it (parent-death signal, and the PID
namespace where there is one).

argv: ``control_fd parent_pid device userns sock:out:err ...`` (one triple of descriptors per
rank, in rank order).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys


def _die_with_parent(parent_pid: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    if parent_pid > 0 and os.getppid() != parent_pid:
        os._exit(70)


def main(argv: list[str]) -> int:
    control_fd, parent_pid, device, userns, *triples = argv
    _die_with_parent(int(parent_pid))
    control = os.fdopen(int(control_fd), "w", buffering=1)
    ranks: dict[int, int] = {}
    for rank, triple in enumerate(triples):
        sock, out, err = (int(part) for part in triple.split(":"))
        module = "kernelcup.harness.child"
        # -P -s: harness/process.py's PYTHON_FLAGS (this launcher imports nothing of the harness's)
        command = [sys.executable, "-P", "-s", "-m", module, str(sock), str(os.getpid()), device, userns, str(rank)]
        try:
            popen = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=(sock,), close_fds=True
            )
        except OSError as exc:
            control.write(json.dumps({"rank": rank, "status": None, "error": str(exc)}) + "\n")
            return 1
        ranks[popen.pid] = rank
        for fd in (sock, out, err):
            os.close(fd)
    while ranks:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in ranks:  # an orphan the namespace's init reaped
            continue
        rank = ranks.pop(pid)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        with contextlib.suppress(OSError):
            control.write(json.dumps({"rank": rank, "status": code}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
