"""``python -m modal._container MODULE QUALNAME OUTPUT SCALEDOWN_S``: one container of the stub server serving
one input, as Modal's container entrypoint runs a sync function (modal/_container_entrypoint.py).

The arguments come pickled on stdin; the outcome is written to OUTPUT as a pickled
``(status, blob)``: ``success`` and the value, ``failure`` and the exception, or ``terminated``
when the input was cancelled (SIGUSR1 raises ``InputCancellation`` in the function's thread,
as Modal's handler does). The container then idles for SCALEDOWN_S, as a warm container waits for
its next input (this one serves no second), and stops, killing every process it started.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from modal import kill_tree
from modal.exception import ExecutionError, InputCancellation


def _cancel(signum: int, frame: FrameType | None) -> None:
    raise InputCancellation("Input was cancelled by user")


def serve(module: str, qualname: str) -> tuple[str, bytes]:
    args, kwargs = pickle.loads(sys.stdin.buffer.read())
    body = importlib.import_module(module)
    for part in qualname.split("."):
        body = getattr(body, part)
    previous = signal.signal(signal.SIGUSR1, _cancel)
    try:
        value = body(*args, **kwargs)  # type: ignore[operator]
    except InputCancellation:
        return "terminated", b""
    except BaseException as exc:
        try:
            return "failure", pickle.dumps(exc)
        except Exception as unpicklable:
            return "failure", pickle.dumps(ExecutionError(f"{type(exc).__name__}: {exc} ({unpicklable})"))
    finally:
        signal.signal(signal.SIGUSR1, previous)
    return "success", pickle.dumps(value)


def main(argv: list[str]) -> int:
    module, qualname, output, scaledown_s = argv
    outcome = serve(module, qualname)
    part = Path(f"{output}.part")
    part.write_bytes(pickle.dumps(outcome))
    part.replace(output)
    time.sleep(float(scaledown_s))  # warm: what the input left running keeps running
    kill_tree(os.getpid())  # the container stops: nothing it started outlives it
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
