"""A local stand-in for Modal's side of ``kernelcup.runners.modal.ModalClient``, behaving as Modal documents.

``spawn`` returns a function-call id at once and the call runs on ("remote") until it ends;
``get(timeout)`` raises the builtin TimeoutError while it runs, the call's own error when it
failed (Modal's exception types), ``OutputExpiredError`` once its output is dropped; ``cancel``
stops it. The calls outlive any runner, as Modal's do when the bot restarts. What a call does is
a *remote*: the real GPU function body (``real_function``) or scripted harness output.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import modal.exception

from kernelcup.harness.spec import Mode, Progress, Result, Status, SystemInfo, progress_line, result_line

Report = Callable[[str], None]
Remote = Callable[[str, float, Report], Awaitable[dict[str, Any]]]


@dataclass
class Call:
    function: str
    args: tuple[Any, ...]
    task: asyncio.Future[dict[str, Any]] | None = None
    progress: str | None = None  # what the Modal Dict holds for this call
    expired: bool = False

    def report(self, line: str) -> None:
        self.progress = line

    @property
    def running(self) -> asyncio.Future[dict[str, Any]]:
        assert self.task is not None
        return self.task


@dataclass
class FakeModal:
    remote: Remote
    app: str = "kernelcup"
    functions: tuple[str, ...] = ("run_h100", "run_t4", "run_cpu")
    credentials: bool = True
    spawn_error: Exception | None = None  # e.g. a quota refusal
    calls: dict[str, Call] = field(default_factory=dict)
    cancelled: list[str] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def configured(self) -> bool:
        return self.credentials

    async def spawn(self, app: str, function: str, *args: Any) -> str:
        if not self.credentials:
            raise modal.exception.AuthError("Token missing. Could not authenticate client.")
        if self.spawn_error is not None:
            raise self.spawn_error
        if app != self.app or function not in self.functions:
            raise modal.exception.NotFoundError(f"Lookup failed for Function '{function}' from the '{app}' app")
        call_id = f"fc-01TEST{next(self._ids):06d}"
        call = Call(function, args)
        call.task = asyncio.ensure_future(self.remote(args[0], args[1], call.report))
        self.calls[call_id] = call
        return call_id

    async def get(self, call_id: str, timeout: float) -> Any:
        call = self.calls.get(call_id)
        if call is None:
            raise modal.exception.NotFoundError(f"Function call {call_id} not found")
        if call.expired:
            raise modal.exception.OutputExpiredError()
        done, _ = await asyncio.wait([call.running], timeout=timeout)
        if not done:
            raise TimeoutError()  # the builtin, as FunctionCall.get raises while the call runs
        if call.running.cancelled():
            raise modal.exception.RemoteError("the call was cancelled")
        return call.running.result()

    async def cancel(self, call_id: str) -> None:
        self.cancelled.append(call_id)
        call = self.calls.get(call_id)
        if call is not None:
            call.running.cancel()

    async def progress(self, call_id: str) -> str | None:
        call = self.calls.get(call_id)
        return None if call is None else call.progress

    async def finish_all(self) -> None:
        """Let every call end (a test's teardown): no task outlives its event loop."""
        for call in self.calls.values():
            call.running.cancel()
        await asyncio.gather(*(c.running for c in self.calls.values()), return_exceptions=True)


def harness_output(
    status: Status = Status.PASSED,
    *,
    seconds: float = 0.0,
    progress: Iterable[Progress] = (),
    gpu: str = "NVIDIA H100 80GB HBM3",
    key: str | None = None,  # sign with another key than the spec's (a forgery)
    gate: asyncio.Event | None = None,
    ranks: Iterable[str] = (),  # a multi-GPU job: which card ran which rank
) -> Remote:
    """A remote that plays the harness: progress lines, then one result line signed with the key."""

    async def remote(spec_json: str, kill_after_s: float, report: Report) -> dict[str, Any]:
        spec = json.loads(spec_json)
        lines = []
        for event in progress:
            lines.append(progress_line(event))
            report(lines[-1])
            await asyncio.sleep(0.01)
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(seconds)
        verdict = "all tests passed" if status is Status.PASSED else status.value
        result = Result(spec["job_id"], Mode(spec["mode"]), status, verdict, score_s=1e-3,
                        system=SystemInfo(device="cuda", gpu=gpu, ranks=list(ranks)))
        lines.append(result_line(result, key or spec["result_key"]))
        return {"lines": lines, "returncode": 0, "stderr": ""}

    return remote


def failing(error: BaseException, seconds: float = 0.0) -> Remote:
    """A remote whose call ends in a Modal error (a timeout, a crashed container)."""

    async def remote(spec_json: str, kill_after_s: float, report: Report) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        raise error

    return remote


def real_function(name: str) -> Remote:
    """The deployed GPU function's real body, run in-process with ``.local()`` (the real harness)."""
    from kernelcup.runners.modal_app import GPU_FUNCTIONS

    async def remote(spec_json: str, kill_after_s: float, report: Report) -> dict[str, Any]:
        output: dict[str, Any] = await asyncio.to_thread(GPU_FUNCTIONS[name].local, spec_json, kill_after_s)
        return output

    return remote
