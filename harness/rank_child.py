"""One rank of a multi-GPU job, inside the submission's process (``harness/child.py``).

The ranks of a job form their own ``torch.distributed`` group (NCCL on GPUs, gloo on the CPU)
before the submission is imported, so ``custom_kernel`` finds ``torch.distributed`` ready as in
GPU MODE's distributed problems. The group's address is a loopback port the harness chose; all
ranks of a job share one sandbox and its network namespace, so they reach each other there and
nothing else.

Two things only this file adds to the child:

- a timed call that starts on every rank together (:meth:`Group.time_call`: the L2 flushed, a
  barrier of the ranks' group, a device synchronize, then the call, timed from this rank's own
  GPU record); each rank reports its own time and the harness takes the slowest rank's;
- a count of the collectives the submission entered during the current order, kept in a small
  file of the job's work folder, so that when a rank hangs the harness can name the rank that
  never joined the collective the others wait in (diagnostic only: it decides no verdict's
  status, only its wording).
"""

from __future__ import annotations

import functools
import mmap
import os
import struct
from datetime import timedelta
from pathlib import Path
from typing import Any

from kernelcup.harness.protocol import RankTimed

COUNTER_FILE = ".kernelcup-rank{rank}.collectives"
# The collectives a submission may call through torch.distributed; calls are counted on entry.
COUNTED = (
    "all_reduce", "reduce", "broadcast", "barrier", "all_gather", "all_gather_into_tensor", "all_to_all",
    "all_to_all_single", "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "send", "recv",
    "isend", "irecv", "batch_isend_irecv", "all_gather_object", "broadcast_object_list",
)


def counter_path(workdir: Path, rank: int) -> Path:
    return workdir / COUNTER_FILE.format(rank=rank)


def read_counter(workdir: Path, rank: int) -> int | None:
    """How many collectives ``rank`` entered in its current order (read by the harness)."""
    try:
        raw = counter_path(workdir, rank).read_bytes()[:8]
        return int(struct.unpack("<q", raw)[0]) if len(raw) == 8 else None
    except OSError:
        return None


class Group:
    """This rank's place in the job's process group."""

    def __init__(self, rank: int, world_size: int, device: Any, workdir: Path) -> None:
        import torch.distributed as dist

        self.rank = rank
        self.world_size = world_size
        self.device = device
        self._dist = dist
        self._barrier = dist.barrier  # the harness's own barrier is never counted
        path = counter_path(workdir, rank)
        path.write_bytes(b"\0" * 8)
        self._file = open(path, "r+b")  # noqa: SIM115  (kept open for the process's life)
        self._counter = mmap.mmap(self._file.fileno(), 8)
        self._count = 0
        for name in COUNTED:
            original = getattr(dist, name, None)
            if callable(original):
                setattr(dist, name, self._counted(original))

    def _counted(self, original: Any) -> Any:
        @functools.wraps(original)
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._count += 1
            self._counter[:8] = struct.pack("<q", self._count)
            return original(*args, **kwargs)

        return counted

    def new_order(self) -> None:
        self._count = 0
        self._counter[:8] = struct.pack("<q", 0)

    def barrier(self, synchronize: Any) -> None:
        synchronize()
        if self.device.type == "cuda":
            self._barrier(device_ids=[self.device.index])
        else:
            self._barrier()
        synchronize()

    def time_call(self, kernel: Any, data: Any, timer: Any) -> tuple[Any, RankTimed]:
        """One call started on all ranks at once: L2 flushed, this group's barrier and a
        synchronize, then the call, timed from this rank's own GPU record (``harness/timing.py``),
        so work a rank hides on a side stream or leaves to a collective it never waits on is in
        its time. The output, and what the harness is told."""
        reading = timer.time_call(kernel, data, lambda: self.barrier(timer.synchronize))
        return reading.output, RankTimed(msg="timed", time_ns=float(reading.time_ns),
                                         outside_ns=float(reading.outside_ns), complete=reading.complete)


def join(rendezvous: dict[str, Any], rank: int, device: Any, workdir: Path) -> Group:
    """Join the job's process group at the harness's loopback port; blocks until every rank has."""
    import torch.distributed as dist

    world_size = int(rendezvous["world_size"])
    port = int(rendezvous["port"])
    backend = "nccl" if device.type == "cuda" else "gloo"
    os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
    # Loopback only: all ranks are on one machine (in the sandbox, loopback is all there is).
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    os.environ.setdefault("NCCL_SOCKET_IFNAME", "lo")
    options: dict[str, Any] = {}
    if device.type == "cuda":
        options["device_id"] = device
    dist.init_process_group(
        backend,
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=float(rendezvous.get("timeout_s", 600))),
        **options,
    )
    return Group(rank, world_size, device, workdir)
