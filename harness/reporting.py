"""What a mode reports while it runs and when it ends: progress events through ``Emit``, and the
child's output into the result. The modes (``run``, ``cuda_eval``, ``own_eval``, ``profile``)
share these, so none of them imports another for them."""

from __future__ import annotations

from collections.abc import Callable

from kernelcup.harness.process import StreamCapture
from kernelcup.harness.spec import Progress, Result

Emit = Callable[[Progress], None]

SHOWN_OUTPUT = 16 * 1024


def attach_output(result: Result, stdout: StreamCapture, stderr: StreamCapture) -> None:
    """The child's stdout and stderr: 16 KiB in the result, the whole (kept) text as files."""
    for name, capture in (("stdout", stdout), ("stderr", stderr)):
        text = capture.text()
        if len(capture.kept) > SHOWN_OUTPUT or capture.dropped:
            note = f"\n[... {capture.dropped} more bytes dropped]" if capture.dropped else ""
            result.files[f"{name}.txt"] = text + note
            text = text[:SHOWN_OUTPUT] + f"\n[... truncated; the full {name} is in {name}.txt]"
        setattr(result, name, text)
