"""What a mode reports while it runs and when it ends: progress events through ``Emit``, and the
child's output into the result. The modes (``run``, ``cuda_eval``, ``own_eval``, ``profile``)
share these, so none of them imports another for them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kernelcup.harness.process import STREAM_KEEP, StreamCapture
from kernelcup.harness.spec import Progress, Result

Emit = Callable[[Progress], None]

SHOWN_OUTPUT = 16 * 1024


def attach_output(result: Result, stdout: StreamCapture, stderr: StreamCapture) -> None:
    """The child's stdout and stderr: 16 KiB in the result, the whole (kept) text as files."""
    for name, capture in (("stdout", stdout), ("stderr", stderr)):
        _attach(result, name, capture.text(), len(capture.kept), capture.dropped)


def attach_process_outputs(result: Result, processes: Sequence[tuple[str, StreamCapture, StreamCapture]]) -> None:
    """The output of each of a job's processes (label, stdout, stderr), one after the other.

    With one process this is :func:`attach_output`. With several, each process's part opens
    with a line naming it, and all of them together are capped as one process's output is.
    """
    if len(processes) == 1:
        attach_output(result, processes[0][1], processes[0][2])
        return
    for name in ("stdout", "stderr"):
        parts: list[str] = []
        dropped = 0
        for label, stdout, stderr in processes:
            capture = stdout if name == "stdout" else stderr
            if not capture.kept and not capture.dropped:
                continue
            lines = [f"[kernelcup: {name} of {label}]", capture.text().removesuffix("\n")]
            if capture.dropped:
                lines.append(f"[... {capture.dropped} more bytes dropped]")
            parts.append("\n".join(lines) + "\n")
            dropped += capture.dropped
        data = "".join(parts).encode("utf-8", errors="replace")
        text = data[:STREAM_KEEP].decode("utf-8", errors="replace")
        if len(data) > STREAM_KEEP:
            dropped += len(data) - STREAM_KEEP
            text += f"\n[... {len(data) - STREAM_KEEP} more bytes dropped]"
        _attach(result, name, text, min(len(data), STREAM_KEEP), dropped, noted=True)


def _attach(result: Result, name: str, text: str, kept: int, dropped: int, noted: bool = False) -> None:
    """``text`` (``kept`` bytes, ``dropped`` more lost) as ``result``'s stdout or stderr: the
    first 16 KiB in the result, the whole as ``<name>.txt`` where it is longer.
    ``noted``: the text already says where bytes were dropped."""
    if kept > SHOWN_OUTPUT or dropped:
        note = f"\n[... {dropped} more bytes dropped]" if dropped and not noted else ""
        result.files[f"{name}.txt"] = text + note
        text = text[:SHOWN_OUTPUT] + f"\n[... truncated; the full {name} is in {name}.txt]"
    setattr(result, name, text)
