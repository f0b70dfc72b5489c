"""The processes of a multi-GPU job, as the harness holds them: one submission process and one
reference process per rank, and the conversation with all of them at once.

The submission's ranks (``kernelcup.harness.child``, one per rank) start through ``kernelcup.harness.rank_launcher``
in one sandbox, so they share its loopback and nothing else; each has its own socket and
output pipes to the harness. The reference ranks (``kernelcup.harness.rank_reference``) are the
harness's own processes (no submission code) with a process group of their own.

Every order goes to all ranks and the harness waits for all their answers within the run's
deadline. The first thing that goes wrong on any rank ends the job on every rank: an exception,
a process that died (named with its exit status), or a deadline passed while some ranks had
not answered (named, with the collectives each entered in that order, so a rank that never
joined the others' collective is called out). Finishing kills the launcher's session, every
reference process and every orphan the harness adopted.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelcup.harness import protocol
from kernelcup.harness.channel import Channel, ChannelClosed, ProtocolError
from kernelcup.harness.process import (
    IMPORT_ROOT,
    PYTHON_FLAGS,
    StreamCapture,
    _kill_session,
    child_environment,
    describe_exit,
    kill_adopted_children,
    sandbox_failure,
)
from kernelcup.harness.rank_child import read_counter
from kernelcup.harness.spec import Status
from kernelcup.harness.verdict import TAMPERED, RunEnded, missing_package, needs_package
from kernelcup.harness.workspace import Workspace

MAX_PAYLOAD = 2 << 30
CLOSED = "__closed__"
MALFORMED = "__malformed__"
SETTLE_S = 1.0  # after one rank fails, how long to wait for another's death (the likelier cause)


def free_port() -> int:
    """A loopback port nothing listens on now (the ranks' rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Reader:
    """One socket read by its own thread; messages go into ``inbox`` as ``(rank, message, payload)``."""

    rank: int
    channel: Channel
    inbox: queue.Queue[tuple[int, dict[str, Any], bytes]]
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                message, payload = self.channel.recv(None, MAX_PAYLOAD)
            except ChannelClosed:
                self.inbox.put((self.rank, {"msg": CLOSED}, b""))
                return
            except ProtocolError as exc:
                self.inbox.put((self.rank, {"msg": MALFORMED, "error": str(exc)}, b""))
                return
            except OSError:
                self.inbox.put((self.rank, {"msg": CLOSED}, b""))
                return
            self.inbox.put((self.rank, message, payload))


@dataclass
class Side:
    """The submission's ranks or the reference's: one channel per rank, answers in one inbox."""

    name: str
    channels: list[Channel]
    inbox: queue.Queue[tuple[int, dict[str, Any], bytes]] = field(default_factory=queue.Queue)
    # A rank's next answer that came while the others' current ones were awaited (``gather``).
    early: collections.deque[tuple[int, dict[str, Any], bytes]] = field(default_factory=collections.deque)

    def __post_init__(self) -> None:
        for rank, channel in enumerate(self.channels):
            Reader(rank, channel, self.inbox).start()

    def send(self, rank: int, message: Mapping[str, Any], payload: bytes | None = None) -> bool:
        try:
            self.channels[rank].send(message, payload)
            return True
        except OSError:
            return False

    def close(self) -> None:
        for channel in self.channels:
            with contextlib.suppress(OSError):
                channel.close()


class RankGroup:
    def __init__(self, workspace: Workspace, world_size: int, device: str, deadline: float, timeout_s: float) -> None:
        self.workspace = workspace
        self.world_size = world_size
        self.device = device  # "cuda" or "cpu"
        self.deadline = deadline
        self.timeout_s = timeout_s
        self.activity = "while starting"
        self.outputs: list[tuple[StreamCapture, StreamCapture]] = []
        self.exit_status: dict[int, int | None] = {}
        self.launcher: subprocess.Popen[bytes] | None = None
        self.launcher_err: StreamCapture | None = None
        self.references: list[subprocess.Popen[bytes]] = []
        self.reference_err: list[StreamCapture] = []
        self.ranks: Side | None = None
        self.checkers: Side | None = None

    # --- starting ------------------------------------------------------------------------------

    def start(self) -> None:
        self._start_references(free_port())
        self._start_ranks()

    def _start_references(self, port: int) -> None:
        channels = []
        for rank in range(self.world_size):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            err_read, err_write = os.pipe()
            command = [
                sys.executable, *PYTHON_FLAGS, "-m", "kernelcup.harness.rank_reference", str(theirs.fileno()),
                str(os.getpid()), self.device, str(rank), str(self.world_size), str(port),
                str(self.workspace.harness_dir),
            ]
            # The folder that holds the kernelcup package, a checkout or an installed copy alike.
            env = {**os.environ, "PYTHONPATH": str(IMPORT_ROOT)}
            try:
                popen = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=err_write, stderr=err_write, env=env,
                    cwd=self.workspace.harness_dir, pass_fds=(theirs.fileno(),), close_fds=True,
                    start_new_session=True,
                )
            finally:
                theirs.close()
                os.close(err_write)
            capture = StreamCapture(err_read)
            capture.start()
            self.references.append(popen)
            self.reference_err.append(capture)
            channels.append(Channel(ours))
        self.checkers = Side("reference", channels)

    def _start_ranks(self) -> None:
        workspace = self.workspace
        sandboxed = workspace.sandbox is not None
        control_ours, control_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        passed: list[int] = [control_theirs.fileno()]
        triples: list[str] = []
        channels: list[Channel] = []
        closing: list[int] = []
        held: list[socket.socket] = []  # the ranks' ends, open until the launcher has them
        for _ in range(self.world_size):
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            out_read, out_write = os.pipe()
            err_read, err_write = os.pipe()
            triples.append(f"{theirs.fileno()}:{out_write}:{err_write}")
            passed += [theirs.fileno(), out_write, err_write]
            closing += [out_write, err_write]
            channels.append(Channel(ours))
            stdout, stderr = StreamCapture(out_read), StreamCapture(err_read)
            stdout.start()
            stderr.start()
            self.outputs.append((stdout, stderr))
            held.append(theirs)
        command = [
            sys.executable, *PYTHON_FLAGS, "-m", "kernelcup.harness.rank_launcher", str(control_theirs.fileno()),
            "0" if sandboxed else str(os.getpid()), self.device, "1" if workspace.identity.userns else "0",
            *triples,
        ]
        if workspace.sandbox is not None:
            command = workspace.sandbox.wrap(command, workspace.work)
            passed += workspace.sandbox.pass_fds
        err_read, err_write = os.pipe()
        try:
            self.launcher = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=err_write, stderr=err_write, cwd=workspace.work,
                env=child_environment(workspace.home, {}), pass_fds=tuple(passed), close_fds=True,
                start_new_session=True, **workspace.identity.popen_credentials(),
            )
        finally:
            control_theirs.close()
            os.close(err_write)
            for fd in closing:
                os.close(fd)
            for theirs in held:
                theirs.close()
        self.launcher_err = StreamCapture(err_read)
        self.launcher_err.start()
        self.ranks = Side("submission", channels)
        threading.Thread(target=self._read_exits, args=(control_ours, self.ranks), daemon=True).start()

    def _read_exits(self, control: socket.socket, ranks: Side) -> None:
        """The launcher's notices of ranks that exited. A rank's socket may stay open in the
        sandbox's own processes after the rank died, so its death is known from these."""
        with control, control.makefile("r") as lines:
            for line in lines:
                try:
                    notice = json.loads(line)
                except ValueError:
                    continue
                if isinstance(notice, dict) and isinstance(notice.get("rank"), int):
                    self.exit_status[int(notice["rank"])] = notice.get("status")
                    ranks.inbox.put((int(notice["rank"]), {"msg": CLOSED}, b""))

    # --- the conversation ------------------------------------------------------------------------

    def tell(self, side: Side, orders: Sequence[Mapping[str, Any]], payloads: list[bytes | None] | None = None) -> None:
        for rank, order in enumerate(orders):
            side.send(rank, order, payloads[rank] if payloads else None)

    def gather(self, side: Side, expected: tuple[str, ...]) -> list[tuple[dict[str, Any], bytes]]:
        """Every rank's next answer, of one of the ``expected`` kinds; the first failure ends the job."""
        answers: dict[int, tuple[dict[str, Any], bytes]] = {}
        held: list[tuple[int, dict[str, Any], bytes]] = []
        while len(answers) < self.world_size:
            remaining = self.deadline - time.monotonic()
            try:
                rank, message, payload = side.early.popleft() if side.early else side.inbox.get(
                    timeout=max(0.0, remaining)
                )
            except queue.Empty:
                self._timed_out(side, sorted(set(range(self.world_size)) - set(answers)))
            kind = str(message.get("msg"))
            if rank in answers and kind not in (CLOSED, MALFORMED):
                # A quick rank's next answer ("loading", then "ready" before a slow rank's
                # "loading" came): kept, in its order, for the next gather.
                held.append((rank, message, payload))
                continue
            if kind not in expected:
                self._fail(side, *self._root_cause(side, rank, message))
            answers[rank] = (message, payload)
        side.early.extendleft(reversed(held))
        return [answers[rank] for rank in range(self.world_size)]

    def _root_cause(self, side: Side, rank: int, message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """A rank whose process died is the cause, not the peers whose collectives broke with it:
        after a failure, wait a moment for another rank's death before naming one."""
        if message.get("msg") == CLOSED:
            return rank, message
        until = time.monotonic() + SETTLE_S
        while time.monotonic() < until:
            try:
                other, later, _ = side.inbox.get(timeout=max(0.0, until - time.monotonic()))
            except queue.Empty:
                break
            if later.get("msg") == CLOSED and other != rank:
                return other, later
        return rank, message

    def _fail(self, side: Side, rank: int, message: dict[str, Any]) -> Any:
        kind = str(message.get("msg"))
        error = str(message.get("error", ""))[:2000]
        where = f"rank {rank}"
        if side is self.checkers:
            if kind == CLOSED:
                status = self.references[rank].poll()
                raise RunEnded(Status.ERROR, f"the harness's reference process for {where} {describe_exit(status)} "
                                             f"{self.activity}{self._reference_error(rank)}")
            self._leaderboard_failed(where, error)
        if kind == CLOSED:
            status = self._rank_exit(rank)
            if status is None and self.launcher is not None and self.launcher.poll() is not None:
                failure = sandbox_failure(self.launcher_err.text() if self.launcher_err else "")
                if failure:
                    raise failure
            raise RunEnded(Status.CRASHED, f"{where}'s process {describe_exit(status)} {self.activity}; "
                                           "the job was ended on every rank")
        if kind == MALFORMED:
            raise RunEnded(Status.FAILED, f"{where} wrote to the harness's private channel {self.activity} ({error})")
        if kind == "exception":
            what = {"oom": "ran out of memory", "cuda": "hit a CUDA error"}.get(str(message.get("kind")),
                                                                              "raised an exception")
            raise RunEnded(Status.CRASHED, f"{where}: the submission {what} {self.activity}: {error}")
        if kind == "problem_error":
            self._leaderboard_failed(where, error)
        if kind == "tampered":
            raise RunEnded(Status.FAILED, f"{where}: {TAMPERED} {self.activity}: {error}")
        if kind == "no_device":
            raise RunEnded(Status.ERROR, f"{where}: {error} on this machine", repeats=True)
        if kind == "load_error":
            package = missing_package(error)
            raise RunEnded(Status.COMPILE_ERROR,
                           f"could not load the submission: {needs_package(package) if package else error}")
        if kind == "internal_error":
            raise RunEnded(Status.ERROR, f"harness error in {where}'s process: {error}")
        raise RunEnded(Status.FAILED, f"{where}'s process answered out of turn {self.activity} "
                                      f"(got {kind[:40]!r})")

    def _leaderboard_failed(self, where: str, error: str) -> Any:
        if self.device == "cpu" and "cuda" in error.lower():  # GPU MODE's problems make inputs on cuda:<rank>
            first = error.split(". ")[0].strip().rstrip(".")[:300]
            raise RunEnded(Status.ERROR, f"this leaderboard's code needs CUDA GPUs and this run is on the CPU "
                                         f"({first}); submit it to one of the leaderboard's GPUs")
        raise RunEnded(Status.ERROR, f"the leaderboard's code failed on {where} {self.activity}: {error}")

    def _rank_exit(self, rank: int) -> int | None:
        until = time.monotonic() + 2.0
        while rank not in self.exit_status and time.monotonic() < until:
            time.sleep(0.05)
        return self.exit_status.get(rank)

    def _reference_error(self, rank: int) -> str:
        lines = [line for line in self.reference_err[rank].text().strip().splitlines() if line.strip()]
        return f": {lines[-1][:300]}" if lines else ""

    def _timed_out(self, side: Side, silent: list[int]) -> Any:
        ranks = _ranks(silent)
        verdict = f"timed out after {self.timeout_s:.0f} s {self.activity}: {ranks} did not answer"
        if side is self.ranks:
            counts = {rank: read_counter(self.workspace.work, rank) for rank in range(self.world_size)}
            known = {rank: count for rank, count in counts.items() if count is not None}
            if len(known) == self.world_size and len(set(known.values())) > 1:
                fewest = min(known.values())
                behind = [rank for rank, count in known.items() if count == fewest]
                waiting = [rank for rank in silent if known[rank] > fewest]
                entered = ", ".join(f"rank {rank} {count}" for rank, count in sorted(known.items()))
                verdict += (f"; {_ranks(behind)} never joined the collective that {_ranks(waiting) or 'the others'} "
                            f"waited in (collectives entered in this call: {entered})")
            elif len(silent) < self.world_size:
                verdict += f" ({_ranks(sorted(set(range(self.world_size)) - set(silent)))} had answered)"
        else:
            verdict = f"the leaderboard's reference {verdict}"
        raise RunEnded(Status.TIMED_OUT if side is self.ranks else Status.ERROR, verdict)

    # --- ending --------------------------------------------------------------------------------

    def finish(self) -> None:
        """End every process of the job: the ranks (with their launcher) and the references."""
        for side in (self.ranks, self.checkers):
            if side is not None:
                for rank in range(self.world_size):
                    side.send(rank, protocol.Exit(op="exit"))
        if self.launcher is not None:
            _kill_session(self.launcher)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.launcher.wait(timeout=5)
        for popen in self.references:
            _kill_session(popen)
        for popen in self.references:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=5)
        kill_adopted_children()
        for side in (self.ranks, self.checkers):
            if side is not None:
                side.close()
        for stdout, stderr in self.outputs:
            stdout.join(timeout=2)
            stderr.join(timeout=2)

    def output_text(self) -> tuple[str, str]:
        """Every rank's stdout and stderr, each line block headed by its rank where there are several."""
        streams: list[str] = []
        for which in (0, 1):
            parts = []
            for rank, pair in enumerate(self.outputs):
                text = pair[which].text()
                if text.strip():
                    parts.append(f"[rank {rank}]\n{text.rstrip()}\n")
            streams.append("".join(parts))
        return streams[0], streams[1]


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return ""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(str(r) for r in ranks[:-1]) + f" and {ranks[-1]}"
