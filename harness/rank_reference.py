"""``python -m kernelcup.harness.rank_reference``: the harness's own process for one rank of a multi-GPU job.

A distributed leaderboard's reference is itself collective (GPU MODE's ``ref_kernel`` calls
``reduce_scatter_tensor``), so it cannot run in the one harness process. Each rank gets one of
these beside the submission's rank: harness code and the leaderboard's ``reference.py`` only,
never the submission's. They form a process group of their own, generate each rank's inputs
from the seeds the harness hands them (the secret stays in the harness), and check the outputs
the submission's ranks shipped as bytes, so checking happens, as for single-GPU jobs, where the
submission cannot reach. Every rank makes the same collective calls in the same order whatever
its output, so one rank's wrong output never leaves the others waiting.

argv: ``sock_fd parent_pid device rank world_size port directory``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any


def _checked(problem: Any, data: Any, output: Any) -> tuple[bool, str]:
    """``(ok, message)``, making the same collective calls on every rank: the reference once,
    then ``check_implementation`` (which usually runs the reference again) even when the output's
    structure is already refused."""
    from kernelcup.harness import checking

    expected = problem.reference(checking.clone_tree(data)) if problem.has_reference() else None
    refused = checking.refusals(output, expected) if expected is not None else []
    unlike = checking.differences(output, expected) if expected is not None and not refused else []
    try:
        ok, message = problem.check(data, output)
    except Exception as exc:
        if not refused and not unlike and expected is not None:
            raise checking.LeaderboardFault(
                f"check_implementation failed on a well-formed output: {type(exc).__name__}: {exc}"
            ) from exc
        ok, message = False, f"check_implementation could not check the output: {type(exc).__name__}: {exc}"
    if refused:
        return False, "; ".join(refused)
    if expected is not None:
        nans = checking.nan_problems(output, expected)
        if nans:
            return False, "; ".join(nans)
        if not ok and unlike:
            message = f"{message}; {'; '.join(unlike)}" if message else "; ".join(unlike)
    return ok, " ".join((message or ("" if ok else "output does not match the reference")).split())[:600]


def main(argv: list[str]) -> int:
    sock_fd, parent_pid, requested_device, rank_text, world_text, port_text, directory = argv
    from kernelcup.harness.child import _die_with_parent

    _die_with_parent(int(parent_pid))
    from kernelcup.harness.channel import Channel

    channel = Channel(socket.socket(fileno=int(sock_fd)))
    try:
        return _serve(channel, requested_device, int(rank_text), int(world_text), int(port_text), Path(directory))
    except Exception as exc:
        print("".join(traceback.format_exception(exc))[-8000:], file=sys.stderr)
        with contextlib.suppress(OSError):
            channel.send({"msg": "internal_error", "error": f"{type(exc).__name__}: {exc}"})
        return 71


def _serve(channel: Any, requested_device: str, rank: int, world_size: int, port: int, directory: Path) -> int:
    import torch
    import torch.distributed as dist

    from kernelcup.harness import checking, transfer
    from kernelcup.harness import fingerprint as fp
    from kernelcup.harness.problem import Problem, ProblemError

    on_gpu = requested_device == "cuda" or (requested_device == "auto" and torch.cuda.is_available())
    if on_gpu:
        torch.cuda.set_device(rank)
        device, device_name = torch.device("cuda", rank), f"cuda:{rank}"
    else:
        device, device_name = torch.device("cpu"), "cpu"
    options: dict[str, Any] = {"device_id": device} if on_gpu else {}
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    # Loopback only: all ranks are on one machine (in the sandbox, loopback is all there is).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    dist.init_process_group(
        "nccl" if on_gpu else "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=600),
        **options,
    )
    try:
        problem = Problem(directory)
    except ProblemError as exc:
        channel.send({"msg": "problem_error", "error": str(exc)})
        return 0
    channel.send({"msg": "ready"})
    data: Any = None
    while True:
        message, payload = channel.recv(None, 1 << 34)
        op = message.get("op")
        try:
            if op == "exit":
                dist.destroy_process_group()
                return 0
            if op == "generate":
                data = problem.generate(dict(message["kwargs"]), device_name)
                channel.send({"msg": "generated", "fingerprint": fp.fingerprint(data)})
            elif op == "check":
                output: Any = None
                error = ""
                try:
                    output = transfer.unpack(message.get("tree"), message.get("placements"), payload, None,
                                             "cuda" if on_gpu else "cpu")
                except transfer.OutputError as exc:
                    error = f"the submission's process sent a malformed output ({exc})"
                # Every rank takes part in the reference's collectives, also where its own output
                # is unusable (None is refused after them), so that no rank waits for one that skipped.
                ok, text = _checked(problem, data, output)
                if error and message.get("tree") is not None:
                    ok, text = False, error
                channel.send({"msg": "checked", "ok": bool(ok), "message": text})
            else:
                channel.send({"msg": "internal_error", "error": f"unknown op {op!r}"})
        except checking.LeaderboardFault as exc:
            channel.send({"msg": "problem_error", "error": str(exc)})
        except Exception as exc:
            print("".join(traceback.format_exception(exc))[-8000:], file=sys.stderr)
            channel.send({"msg": "problem_error", "error": f"{type(exc).__name__}: {exc}"[:2000]})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
