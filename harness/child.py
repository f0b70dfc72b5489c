"""The submission's process: imports the submission and runs it on the harness's orders.

Started by the harness (``harness/process.py``) with a socket to it as its only channel; its
stdout and stderr are pipes the harness drains. It never sees the job spec, the secret seed
or the result key: it learns each case's keyword arguments (with already-derived seeds) when
it is told to run that case. Order matters: torch and every primitive the timer needs are
captured before the submission is imported.

It starts up (torch, the device, the timer) before it is told which job it serves: the harness
may start it while it still waits for a job spec, so the job finds it warm. The ``load`` order
then names the working directory, the submission file and the build-cache variables.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import importlib.util
import os
import signal
import socket
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kernelcup.harness import protocol

BORN = time.monotonic()  # the start-up the harness budgets for a fresh process counts from here
MAX_TRACEBACK = 8000
LATE_WORK = (
    "its output was still being written after custom_kernel returned (work left to a thread, or "
    "queued after the call ended): every result must be complete when the call returns"
)


def _enter_user_namespace() -> str:
    """Leave the harness's user namespace: no capability over it, uid kept for files.

    Must run while the process is single-threaded (before torch is imported), and before
    the parent-death signal is set, since a credential change clears that signal.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        clone_newuser = 0x10000000
        if libc.unshare(clone_newuser) != 0:
            return f"user namespace unavailable (errno {ctypes.get_errno()})"
    except (OSError, AttributeError) as exc:
        return f"user namespace unavailable ({exc})"
    return "own user namespace"


def _arm_watchdog() -> None:
    """Debugging aid for hangs on a new machine: stacks to stderr, then exit, after N seconds."""
    seconds = os.environ.get("KERNELCUP_HARNESS_WATCHDOG_S")
    if seconds:
        import faulthandler

        faulthandler.dump_traceback_later(float(seconds), exit=True)


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL this process when its parent dies, even by SIGKILL (Linux only).

    ``parent_pid`` is the harness's, checked in case it died first; 0 when a tool (ncu) sits
    between the harness and this process."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if parent_pid > 0 and os.getppid() != parent_pid:  # the harness died before the prctl above
        os._exit(70)


def _poison_host_allocations() -> None:
    """glibc fills fresh allocations with 0xFF bytes (NaN for floats, -1 for integers).

    The CPU counterpart of poisoning output buffers: memory a submission allocates but leaves
    unwritten reads as NaN rather than as stale data or zeros. Raising the mmap threshold
    keeps large tensors in the heap, where the fill applies.
    """
    try:
        libc = ctypes.CDLL(None)
        m_perturb, m_mmap_threshold = -6, -3
        libc.mallopt(m_perturb, 0x100)  # low byte 0: freed memory 0x00, allocated ~0x00 = 0xFF
        libc.mallopt(m_mmap_threshold, 32 << 20)
    except (OSError, AttributeError):
        pass


def _poison_cuda_cache(nbytes: int) -> None:
    """Fill free memory in torch's CUDA cache with 0xFF bytes (NaN for floats, -1 for integers).

    Before a checked call: tensors the submission then allocates and leaves partly unwritten
    read as NaN instead of stale data. Large blocks come from one poisoned segment of about
    ``nbytes``, small ones (under 1 MiB, their own pool) from poisoned 2 MiB segments; and every
    block already free in the cache (the inputs' neighbours, the fingerprint's temporaries) is
    taken at its exact size and filled, since the allocator hands out the best fit first.
    """
    import torch

    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    size = max(64 << 20, min(nbytes, free // 4))
    held = [torch.empty(size, dtype=torch.uint8, device="cuda")]
    held += [torch.empty(512 << 10, dtype=torch.uint8, device="cuda") for _ in range(32)]
    sizes = [
        int(block["size"])
        for segment in torch.cuda.memory_snapshot()  # type: ignore[no-untyped-call]
        for block in segment.get("blocks", [])
        if block.get("state") == "inactive" and int(block.get("size", 0)) > 0
    ]
    for block_size in sorted(sizes, reverse=True)[:4096]:
        try:
            held.append(torch.empty(block_size, dtype=torch.uint8, device="cuda"))
        except RuntimeError:  # out of memory: what is held is poisoned, that is enough
            break
    for tensor in held:
        tensor.fill_(0xFF)
    del held


def _format_exception(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text[-MAX_TRACEBACK:]


def _classify(exc: BaseException, oom_types: tuple[type[BaseException], ...]) -> str:
    if isinstance(exc, oom_types):
        return "oom"
    text = str(exc)
    if "CUDA error" in text or "CUDA out of memory" in text or "illegal memory access" in text:
        return "oom" if "out of memory" in text else "cuda"
    return "exception"


def main(argv: list[str]) -> int:
    sock_fd, parent_pid, requested_device, userns = argv[:4]
    rank = int(argv[4]) if len(argv) > 4 else -1  # a rank of a multi-GPU job (harness/multi_gpu.py)
    _arm_watchdog()
    isolation = _enter_user_namespace() if userns == "1" else ""
    _die_with_parent(int(parent_pid))
    if parent_pid == "0":  # in the sandbox, whose job reads this command line: the interpreter's path
        from kernelcup.harness.sandbox import show_arguments  # may lie in the bot's checkout (a venv)

        show_arguments([os.path.basename(sys.orig_argv[0]), *sys.orig_argv[1:]])
    from kernelcup.harness.channel import Channel

    channel = Channel(socket.socket(fileno=int(sock_fd)))
    try:
        return _serve(channel, requested_device, isolation, rank)
    except Exception as exc:  # the harness's own code failed in here: report, never hang
        print(_format_exception(exc), file=sys.stderr)
        with contextlib.suppress(OSError):
            channel.send(protocol.Failure(msg="internal_error", error=f"{type(exc).__name__}: {exc}"))
        return 71


def _pin_if_asked(message: dict[str, Any]) -> list[int] | None:
    """The calling thread onto the core the harness names (harness/cpus.py), from the first
    warm-up or timed call on; the cores it may then use, read back, or None where none was named."""
    from kernelcup.harness import cpus

    if not isinstance(message.get("cpu"), int):
        return None
    cpus.pin_this_thread({int(message["cpu"])})
    return cpus.this_thread_cores()


def _start_device(channel: Any, requested_device: str, rank: int) -> Any:
    """The job's device, set up before the job comes (the CUDA context made now, not at the first
    case), or None where a GPU was asked for and there is none (the harness is told so)."""
    import torch

    if requested_device == "cuda" or (requested_device == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            channel.send(protocol.Failure(msg="no_device", error="a GPU was requested but CUDA is not available"))
            return None
        if rank >= 0:
            torch.cuda.set_device(rank)
        device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.init()  # type: ignore[no-untyped-call]
        torch.empty(1, device=device)  # the context exists now, not at the first case
        return device
    _poison_host_allocations()
    # One intra-op thread: an op split over several threads waits for the slowest, and on a
    # shared box one descheduled thread costs the whole call a scheduler slice (JOURNAL.md,
    # One torch thread on the CPU). A submission may still ask for more.
    torch.set_num_threads(1)
    return torch.device("cpu")


def _serve(channel: Any, requested_device: str, isolation: str, rank: int = -1) -> int:
    """Start up (torch, the device, the timer), then wait for the job: the harness may start this
    process before it has a job, so a job finds it warm. ``rank`` >= 0: one rank of a
    multi-GPU job, bound to its own card (``cuda:<rank>`` of the cards the job was given)."""
    from kernelcup.harness import timing
    from kernelcup.harness.witness import Witnesses

    device = _start_device(channel, requested_device, rank)
    if device is None:
        return 0
    timer = timing.make_timer(device)
    witnesses = Witnesses(device)
    channel.send(protocol.Started(msg="started", device=device.type, startup_s=round(time.monotonic() - BORN, 3)))
    orders = _load_job(channel, device, timer, witnesses, isolation, rank)
    if orders is None:
        return 0
    return orders.serve()


def _load_job(channel: Any, device: Any, timer: Any, witnesses: Any, isolation: str, rank: int) -> Orders | None:
    """The ``load`` order: the job's folder, its problem, the group of a multi-GPU job and the
    submission; then ``ready``. None where the job cannot go on (the harness has been told why)."""
    from kernelcup.harness.integrity import Watch
    from kernelcup.harness.problem import Problem, ProblemError

    order, _ = channel.recv(max_payload=0)
    if order.get("op") != "load":
        return None
    load_began = time.monotonic()
    workdir = Path(str(order["workdir"]))
    os.environ.update({str(k): str(v) for k, v in dict(order.get("env") or {}).items()})
    os.chdir(workdir)
    try:
        problem = Problem(workdir)
    except ProblemError as exc:
        channel.send(protocol.Failure(msg="problem_error", error=str(exc)))
        return None
    group: Any = None
    if rank >= 0:
        from kernelcup.harness import rank_child

        try:
            group = rank_child.join(dict(order.get("rendezvous") or {}), rank, device, workdir)
        except Exception as exc:
            channel.send(protocol.Failure(msg="internal_error", error=f"rank {rank} could not join its group: {exc}"))
            return None
    # What the submission must leave as it is.
    watch = Watch.before_submission(workdir, {"the problem": problem, "the timer": timer, "the samples": witnesses})
    channel.send(protocol.Loading(msg="loading"))
    kernel = _load_submission(channel, workdir / str(order["submission"]))
    if kernel is None:
        return None
    # No automatic garbage collection from here on: a collection triggered by the garbage of a
    # timed call would land in the untimed part of a later order and make the harness's clock
    # cross-check see time the child did not report. Collections run between cases instead;
    # freezing what exists now (torch, the problem, the submission) keeps them short.
    gc.collect()
    gc.freeze()
    gc.disable()
    info = {**_device_info(device), "isolation": isolation}
    load_s = round(time.monotonic() - load_began, 3)  # the problem, the group, the submission's import
    channel.send(protocol.Ready(msg="ready", device=str(device), info=info, load_s=load_s))
    return Orders(channel, device, timer, problem, kernel, witnesses, watch, group)


class Orders:
    """The harness's orders to a loaded job, one at a time, until ``exit``: ``run`` (a checked
    call), ``warmup``, ``time`` (a timed call), ``time_rank`` (a multi-GPU timed call) and
    ``ship`` (the output of the last timed call, sent for checking)."""

    def __init__(self, channel: Any, device: Any, timer: Any, problem: Any, kernel: Any, witnesses: Any,
                 watch: Any, group: Any) -> None:
        import torch

        self.channel, self.device, self.timer, self.problem = channel, device, timer, problem
        self.kernel, self.witnesses, self.watch, self.group = kernel, witnesses, watch, group
        self.oom_types: tuple[type[BaseException], ...] = (MemoryError, torch.cuda.OutOfMemoryError)
        # Where inputs are made: a rank's own card, else the device's kind ("cuda", "cpu").
        self.device_name = str(device) if group is not None and device.type == "cuda" else device.type
        self.staging: Any = None
        self.ipc_failed = group is not None  # ranks ship their outputs as bytes, to the harness's rank processes
        self.kept: Any = None  # the last timed call's output, until it is shipped
        self.witness: Any = None  # what that output held right after the call
        self.inputs_seen: list[Any] = []  # samples of that call's inputs, taken as they were made

    def serve(self) -> int:
        handlers = {"run": self.run, "warmup": self.warm_up, "time": self.time, "ship": self.ship_kept}
        if self.group is not None:
            handlers["time_rank"] = self.time_rank
        while True:
            message, _ = self.channel.recv(max_payload=0)
            op = message.get("op")
            if self.group is not None:
                self.group.new_order()
            if op == "exit":
                return 0
            handler = handlers.get(str(op))
            try:
                if handler is None:
                    self.channel.send(protocol.Failure(msg="internal_error", error=f"unknown op {op!r}"))
                else:
                    handler(message)
            except _ProblemFailure as exc:
                self.channel.send(protocol.Failure(msg="problem_error", error=str(exc)))
            except _Tampered as exc:
                self.channel.send(protocol.Failure(msg="tampered", error=str(exc)))
            except BaseException as exc:
                print(_format_exception(exc), file=sys.stderr)
                self.channel.send(protocol.Raised(msg="exception", kind=_classify(exc, self.oom_types),
                                                  error=f"{type(exc).__name__}: {exc}"[:2000]))

    # --- the orders ------------------------------------------------------------------------------

    def run(self, message: dict[str, Any]) -> None:
        import torch

        from kernelcup.harness import fingerprint, transfer

        self.kept = None
        data = self.generate(message)
        input_bytes = transfer.nbytes_of(data)
        data_print = fingerprint.fingerprint(data)
        if self.device.type == "cuda":  # after the fingerprint: its temporaries are freed too
            _poison_cuda_cache(3 * input_bytes)
        self.timer.synchronize()
        output = self.kernel(data)
        self.timer.synchronize()
        del data
        self.ship(output, data_print)
        del output
        if self.device.type == "cuda":  # the harness's check runs next and may need the memory
            torch.cuda.empty_cache()

    def warm_up(self, message: dict[str, Any]) -> None:
        from kernelcup.harness import timing

        pinned = _pin_if_asked(message)
        self.kept = None
        gc.collect()
        fresh_inputs = functools.partial(self.generate, message)
        warm = timing.warm_up(self.timer, self.kernel, fresh_inputs, float(message["min_s"]), float(message["max_s"]))
        answer = protocol.Warm(msg="warm", calls=warm.calls, seconds=warm.seconds, steady=warm.steady,
                               median_ns=warm.median_ns)
        if pinned is not None:
            answer["cores"] = pinned
        self.channel.send(answer)

    def time(self, message: dict[str, Any]) -> None:
        pinned = _pin_if_asked(message)
        self.kept = self.witness = None
        self.timer.start_record()  # other threads' launches while the inputs are made are seen too
        data = self.generate(message)
        self.inputs_seen = self.witnesses.take_each(data)  # before anything of the submission's runs
        reading = self.timer.time_call(self.kernel, data, self._announce_call)
        self.kept = reading.output
        # Before anything lets another thread run (the message below): what the output holds now.
        self.witness = self.witnesses.take(self.kept)
        timed = protocol.Timed(
            msg="timed", time_ns=reading.time_ns, host_ns=reading.host_ns, outside_ns=reading.outside_ns,
            idle_share=reading.idle_share, waited=reading.waited, activities=reading.activities,
            streams=reading.streams, complete=reading.complete,
        )
        if pinned is not None:
            timed["cores"] = pinned
        self.channel.send(timed)

    def time_rank(self, message: dict[str, Any]) -> None:
        self.kept = self.witness = None
        self.inputs_seen = []
        self.timer.start_record()
        data = self.generate(message)
        self.kept, timed = self.group.time_call(self.kernel, data, self.timer)
        self.channel.send(timed)

    def ship_kept(self, message: dict[str, Any]) -> None:
        self._intact()
        if self.witnesses.changed(self.witness, self.kept):
            self.channel.send(protocol.BadOutput(msg="bad_output", error=LATE_WORK))
        else:
            self.ship(self.kept, None, [w.to_message() for w in self.inputs_seen])
        self.kept = self.witness = None

    # --- what the orders share -------------------------------------------------------------------

    def generate(self, message: dict[str, Any]) -> Any:
        """A case's inputs, made by the leaderboard's generator, with the harness's code checked
        unchanged before and after (``harness/integrity.py``)."""
        self._intact()
        try:
            data = self.problem.generate(dict(message["kwargs"]), self.device_name)
        except Exception as exc:
            raise _ProblemFailure(f"generate_input failed: {type(exc).__name__}: {exc}") from exc
        self._intact()
        return data

    def ship(self, output: Any, data_print: Any, inputs: list[dict[str, Any]] | None = None) -> None:
        """An output to the harness: through the staging buffer it lends (CUDA IPC) where it can,
        else as bytes on the channel."""
        from kernelcup.harness import transfer

        try:
            tree, tensors = transfer.flatten(output)
        except transfer.OutputError as exc:
            self.channel.send(protocol.BadOutput(msg="bad_output", error=str(exc)))
            return
        needed = transfer.staging_bytes_needed(tensors)
        if needed and not self.ipc_failed and (self.staging is None or self.staging.nbytes < needed):
            self._borrow_staging(needed)
        staging = self.staging
        buffer = staging.tensor if staging is not None and staging.nbytes >= needed else None
        placements, payload = transfer.pack(tensors, buffer)
        self.timer.synchronize()
        self.channel.send(protocol.Output(msg="output", tree=tree, placements=placements, fingerprint=data_print,
                                          inputs=inputs or []), payload)

    def _borrow_staging(self, needed: int) -> None:
        self.channel.send(protocol.NeedStaging(msg="need_staging", nbytes=needed))
        reply, _ = self.channel.recv(max_payload=0)
        if reply.get("op") != "staging":
            return
        try:
            from kernelcup.harness.cudaipc import BorrowedBuffer

            if self.staging is not None:
                self.staging.close()
            self.staging = BorrowedBuffer(str(reply["handle"]), int(reply["nbytes"]))
        except Exception as exc:
            self.staging = None
            self.ipc_failed = True
            # A fact for the operator (the result's system notes, the runner's log), not a box in
            # the contestant's stderr.
            note = f"outputs copied through the host: CUDA IPC unavailable ({exc})"
            self.channel.send(protocol.Notice(msg="notice", text=note))

    def _intact(self) -> None:
        changed = self.watch.changed()
        if changed:
            raise _Tampered(changed)

    def _announce_call(self) -> None:
        self.channel.send(protocol.Calling(msg="calling"))


class _ProblemFailure(Exception):
    pass


class _Tampered(Exception):
    """The submission changed the harness's code in this process (``harness/integrity.py``)."""


class LoadError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # syntax, import or missing


def load_submission(path: Path) -> Any:
    """Import the submission and return its ``custom_kernel``; :class:`LoadError` otherwise."""
    try:
        code = compile(path.read_bytes(), path.name, "exec")
    except SyntaxError as exc:
        raise LoadError("syntax", f"{exc.msg} ({path.name}, line {exc.lineno})") from None
    except OSError as exc:
        raise LoadError("import", str(exc)) from None
    name = path.stem if path.stem.isidentifier() else "submission"
    spec = importlib.util.spec_from_loader(name, loader=None, origin=str(path))
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        print(_format_exception(exc), file=sys.stderr)
        raise LoadError("import", f"it called exit({exc.code!r:.60}) while being imported, which would end the process "
                        "that runs it; keep work at import to definitions and custom_kernel") from None
    except BaseException as exc:
        print(_format_exception(exc), file=sys.stderr)
        raise LoadError("import", f"{type(exc).__name__}: {exc}"[:2000]) from None
    kernel = module.__dict__.get("custom_kernel")
    if not callable(kernel):
        raise LoadError("missing", f"{path.name} defines no custom_kernel function")
    return kernel


def _load_submission(channel: Any, path: Path) -> Any:
    try:
        return load_submission(path)
    except LoadError as exc:
        channel.send(protocol.LoadFailure(msg="load_error", kind=exc.kind, error=str(exc)))
        return None


def _device_info(device: Any) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda or ""}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(
            gpu=props.name,
            capability=f"{props.major}.{props.minor}",
            l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
            memory_bytes=int(props.total_memory),
            uuid=str(getattr(props, "uuid", "")),
        )
    triton = sys.modules.get("triton")
    if triton is not None:
        info["triton"] = str(getattr(triton, "__version__", ""))
    return info


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
