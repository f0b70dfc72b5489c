"""The harness's side of the conversation with the submission's process.

Each method sends one order and waits for its answer within the run's deadline. Anything that
ends the run early (a crash, a timeout, an exception in the submission, a broken leaderboard)
is raised as :class:`RunEnded` with the status and a one-line verdict naming what was running.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelcup.harness import cpus, protocol, transfer
from kernelcup.harness.channel import ChannelClosed, ChannelTimeout, Message, ProtocolError
from kernelcup.harness.process import Child, describe_exit, sandbox_failure
from kernelcup.harness.sandbox import SETUP_FAILED
from kernelcup.harness.spec import Status
from kernelcup.harness.verdict import TAMPERED, RunEnded, missing_package, needs_package
from kernelcup.harness.witness import MAX_INPUT_TENSORS, Witness

MAX_STAGING = 16 << 30


@dataclass
class Timed:
    """One timed call as the child reported it (``timing.Reading`` without the output)."""

    time_ns: float
    host_ns: float
    window_ns: float  # the harness's own clock around the whole order
    # The harness's clock from the child's "calling" message (sent just before the call) to its
    # reading: the call, its timing and two message hops. 0 when unknown.
    call_ns: float = 0.0
    outside_ns: float = 0.0
    idle_share: float = 0.0
    waited: bool = False
    activities: int = 0
    streams: int = 0


@dataclass
class Shipped:
    output: Any  # None when ``error`` is set
    fingerprint: Any
    error: str = ""  # the output was not made of tensors
    # A timed call's inputs as the child saw them before the call (harness/witness.py).
    inputs: list[Witness] = field(default_factory=list)


class Session:
    def __init__(self, child: Child, deadline: float, timeout_s: float, device: str) -> None:
        self.child = child
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.device = device  # "cpu" or "cuda", set from the child's ready message
        self.activity = "while starting"
        self._staging: list[Any] = []  # every buffer lent out stays alive until the end
        self._ipc_broken = False
        self.notes: list[str] = []  # the child's notices for the operator (``SystemInfo.notes``)
        self.info: dict[str, Any] = {}
        self.startup_s = 0.0  # the child's own start-up (torch, device, timer), as it measured it
        self.load_s = 0.0  # the child's load order to ready (the problem, the submission's import)
        self._pinned = False  # the timing cores (harness/cpus.py) are chosen at the first warm-up or timed call
        self.timing_cores = ""  # where the child's timed calls ran, as the child read it back
        self._harness_cores: set[int] = set()

    def close(self) -> None:
        for buffer in self._staging:
            with contextlib.suppress(Exception):
                buffer.close()
        self._staging.clear()

    # --- low level -------------------------------------------------------------------------

    def _send(self, message: protocol.Order) -> None:
        try:
            self.child.channel.send(message)
        except OSError:
            self._raise_dead()

    def _receive(self, max_payload: int = 0) -> tuple[Message, bytes]:
        try:
            message, payload = self.child.channel.recv(self.deadline, max_payload)
        except ChannelTimeout:
            raise RunEnded(Status.TIMED_OUT, f"timed out after {self.timeout_s:.0f} s {self.activity}") from None
        except ChannelClosed:
            self._raise_dead()
        except ProtocolError as exc:
            raise RunEnded(
                Status.FAILED,
                f"the submission wrote to the harness's private channel {self.activity} ({exc})",
            ) from None
        kind = message.get("msg")
        error = str(message.get("error", ""))[:2000]
        if kind == "exception":
            what = {"oom": "ran out of memory", "cuda": "hit a CUDA error"}.get(
                str(message.get("kind")), "raised an exception"
            )
            raise RunEnded(Status.CRASHED, f"the submission {what} {self.activity}: {error}")
        if kind == "problem_error":
            raise RunEnded(Status.ERROR, f"the leaderboard's code failed {self.activity}: {error}")
        if kind == "tampered":
            raise RunEnded(Status.FAILED, f"{TAMPERED} {self.activity}: {error}")
        if kind == "no_device":
            raise RunEnded(Status.ERROR, f"{error} on this machine", repeats=True)
        if kind == "internal_error":
            raise RunEnded(Status.ERROR, f"harness error in the submission's process: {error}")
        if kind == "load_error":
            package = missing_package(error)
            why = needs_package(package) if package else error
            raise RunEnded(Status.COMPILE_ERROR, f"could not load the submission: {why}")
        return message, payload

    def _raise_dead(self) -> Any:
        status = self.child.exit_status()
        if status == SETUP_FAILED:
            self.child.stderr.join(timeout=1)
            failure = sandbox_failure(self.child.stderr.text())
            if failure:
                raise failure
        raise RunEnded(Status.CRASHED, f"the submission's process {describe_exit(status)} {self.activity}")

    def _expect(self, kind: str, max_payload: int = 0) -> tuple[Message, bytes]:
        message, payload = self._receive(max_payload)
        if message.get("msg") != kind:
            raise RunEnded(
                Status.FAILED,
                f"the submission's process answered out of turn {self.activity} "
                f"(expected {kind!r}, got {str(message.get('msg'))[:40]!r})",
            )
        return message, payload

    # --- orders --------------------------------------------------------------------------------

    def wait_started(self) -> str:
        """Wait until the child has started up; the device it runs on ("cuda" or "cpu")."""
        self.activity = "while starting"
        message, _ = self._expect("started")
        startup = message.get("startup_s")  # sent before the submission is imported: harness code's figure
        if isinstance(startup, int | float) and 0 <= startup < 1e5:
            self.startup_s = float(startup)
        return str(message.get("device", ""))

    def load(self, order: protocol.Load) -> None:
        """Hand the started child its job: the directory, the submission, the build caches."""
        self._send(order)

    def wait_ready(self) -> None:
        self.activity = "while starting"
        self._expect("loading")
        self.activity = "while loading the submission"
        message, _ = self._expect("ready")
        self.device = "cuda" if str(message.get("device", "")).startswith("cuda") else "cpu"
        info = message.get("info")
        self.info = info if isinstance(info, dict) else {}
        load = message.get("load_s")
        if isinstance(load, int | float) and 0 <= load < 1e5:
            self.load_s = float(load)

    def start_run(self, kwargs: dict[str, Any]) -> None:
        """Order a checked call; collect its output with :meth:`collect`."""
        self._send(protocol.Run(op="run", kwargs=kwargs))

    def collect(self, max_payload: int) -> Shipped:
        while True:
            message, payload = self._receive(max_payload)
            kind = message.get("msg")
            if kind == "bad_output":
                return Shipped(None, None, str(message.get("error", "bad output"))[:600])
            if kind == "need_staging":
                self._lend_staging(message.get("nbytes"))
                continue
            if kind == "notice":
                text = str(message.get("text", ""))[:300]
                if text and text not in self.notes:
                    self.notes.append(text)
                continue
            if kind != "output":
                raise RunEnded(Status.FAILED, f"the submission's process answered out of turn {self.activity}")
            staging = self._staging[-1].tensor if self._staging and not self._ipc_broken else None
            try:
                output = transfer.unpack(message.get("tree"), message.get("placements"), payload, staging, self.device)
            except transfer.OutputError as exc:
                raise RunEnded(
                    Status.FAILED,
                    f"the submission's process sent a malformed output {self.activity}: {exc}",
                ) from None
            reported = message.get("inputs")
            seen = [Witness.from_message(m) for m in reported[:MAX_INPUT_TENSORS]] if isinstance(reported, list) else []
            if any(w is None for w in seen):
                raise RunEnded(Status.FAILED, f"the submission's process sent malformed input samples {self.activity}")
            return Shipped(output, message.get("fingerprint"), inputs=[w for w in seen if w is not None])

    def _lend_staging(self, nbytes: Any) -> None:
        if (
            not isinstance(nbytes, int)
            or nbytes <= 0
            or nbytes > MAX_STAGING
            or self._ipc_broken
            or os.environ.get("KERNELCUP_HARNESS_IPC") == "0"  # operator switch: copy via the host
        ):
            self._send(protocol.NoStaging(op="no_staging"))
            return
        try:
            from kernelcup.harness.cudaipc import SharedBuffer

            free, _ = torch.cuda.mem_get_info()
            if nbytes > free // 2:
                torch.cuda.empty_cache()  # the harness's own cached blocks first (a 4 GiB output's round 2)
                free, _ = torch.cuda.mem_get_info()
            if nbytes > free // 2:
                raise MemoryError("not enough free GPU memory for a staging buffer")
            buffer = SharedBuffer(max(nbytes, 1 << 20))
        except Exception:
            self._ipc_broken = True
            self._send(protocol.NoStaging(op="no_staging"))
            return
        self._staging.append(buffer)
        self._send(protocol.Staging(op="staging", handle=buffer.handle_hex, nbytes=buffer.nbytes))

    def warm_up(self, kwargs: dict[str, Any], min_s: float, max_s: float) -> Message:
        order = protocol.WarmUp(op="warmup", kwargs=kwargs, min_s=min_s, max_s=max_s)
        self._pin(order)  # the warm-up runs on the core that times
        self._send(order)
        message, _ = self._expect("warm")
        self._read_cores(order, message)
        return message

    def _pin(self, order: protocol.WarmUp | protocol.Time) -> None:
        """From the first warm-up or timed call on, the child's calling thread on its timing
        core (harness/cpus.py); tests, loading and compiling before it keep every other core."""
        if self._pinned:
            return
        self._pinned = True
        chosen = cpus.timing_cpus() if self.device == "cuda" else None
        if chosen is not None:  # the harness's own thread kept off the timing cores from its start
            self._harness_cores = chosen[0]
            order["cpu"] = chosen[1]

    def _read_cores(self, order: protocol.WarmUp | protocol.Time, message: Message) -> None:
        if "cpu" in order:
            read = message.get("cores")
            cores = [c for c in read if isinstance(c, int)] if isinstance(read, list) else []
            self.timing_cores = cpus.describe(cores, self._harness_cores)

    def time_call(self, kwargs: dict[str, Any]) -> Timed:
        order = protocol.Time(op="time", kwargs=kwargs)
        self._pin(order)
        start = time.perf_counter_ns()
        self._send(order)
        self._expect("calling")
        calling = time.perf_counter_ns()
        message, _ = self._expect("timed")
        end = time.perf_counter_ns()
        window, call = float(end - start), float(end - calling)
        self._read_cores(order, message)
        values = [message.get(key) for key in ("time_ns", "host_ns", "outside_ns", "idle_share")]
        if not all(isinstance(v, int | float) and 0 <= v < 1e15 for v in values):
            raise RunEnded(Status.FAILED, f"the submission's process sent impossible timings {self.activity}")
        if message.get("complete") is False:
            raise RunEnded(
                Status.FAILED,
                f"the GPU's record of the call was switched off inside it {self.activity}: the call cannot be timed",
            )
        time_ns, host, outside, idle = (float(v) for v in values)  # type: ignore[arg-type]
        counts = [message.get("activities"), message.get("streams")]
        activities, streams = (int(c) if isinstance(c, int) else 0 for c in counts)
        waited = message.get("waited") is True
        return Timed(time_ns, host, window, call, outside, min(idle, 1.0), waited, activities, streams)

    def ship(self, max_payload: int) -> Shipped:
        self._send(protocol.Ship(op="ship"))
        return self.collect(max_payload)

    def exit(self) -> None:
        with contextlib.suppress(OSError):
            self.child.channel.send(protocol.Exit(op="exit"))
