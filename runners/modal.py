"""The Modal runner: each job is one call of the deployed GPU function for its card.

The runner ``spawn``s the call and has the pipeline store its id in the job row at once, so a
restarted bot re-attaches to the call (``FunctionCall.from_id``) instead of losing or repeating
it. It waits with ``get(timeout=poll_s)``, which raises TimeoutError while the call runs, and
reads the harness's progress from a Modal Dict between waits. The function returns the
harness's stdout lines; the signed result line is checked here, with the key of the spec the
call was spawned with (kept in the reference for a re-attach).

Everything Modal is behind ``ModalClient``: ``ModalSDK`` is the real SDK, tests pass a local
stand-in that behaves as Modal documents. Deploying the functions: runners/modal_app.py. The SDK
is imported with this module, which kernelcup loads only where the GPU registry names this
runner: without the ``modal`` package the runner is off (``pip install 'kernelcup[modal]'``).
"""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import modal
import modal.config
import modal.exception
import structlog

from kernelcup.core.config import Settings, runner_chosen
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, RunnerError
from kernelcup.core.pipeline.timeouts import platform_timeout_s, remote_kill_s
from kernelcup.harness.spec import JobSpec, Progress, Result, ResultReader, SpecError, parse_line

log = structlog.get_logger(__name__)

APP_NAME = "kernelcup"
PROGRESS_DICT = "kernelcup-progress"
REF_PREFIX = "modal:"
DEFAULTS: dict[str, Any] = {
    "app": APP_NAME,
    "poll_s": 5.0,  # each wait for the result long-polls this long, then progress is read
    "startup_s": 300.0,  # container start, counted inside Modal's function timeout
    "max_harness_s": 900.0,  # the longest harness limit the deployed functions accept
    "scaledown_s": 60,  # an idle container waits this long for the next job (billed while it waits)
}
_EXPIRED = object()
def runner_options(settings: Settings) -> dict[str, Any]:
    """The ``runners.modal`` config section over its defaults."""
    return {**DEFAULTS, **settings.runners.get("modal", {})}


def function_name(gpu_name: str) -> str:
    """The Modal function serving a registry GPU: "A100-80GB" -> "run_a100_80gb"."""
    return "run_" + "".join(c if c.isalnum() else "_" for c in gpu_name.lower())


def deployment(settings: Settings) -> dict[str, Any]:
    """What runners/modal_app.py deploys: the app, and one function per registry GPU with a
    ``modal_gpu`` option, its timeout derived by kernelcup.core.pipeline.timeouts from the values the runner reads."""
    options = runner_options(settings)
    timeout = platform_timeout_s(float(options["max_harness_s"]), float(options["startup_s"]))
    functions = [
        {
            "name": function_name(name),
            "gpu": str(gpu.options["modal_gpu"]),
            "timeout_s": timeout,
            "max_containers": settings.runner_concurrency("modal", name),
            "scaledown_s": int(options["scaledown_s"]),
        }
        for name, gpu in settings.gpus.items()
        if gpu.options.get("modal_gpu")
    ]
    return {"app": str(options["app"]), "progress_dict": PROGRESS_DICT, "functions": functions}


class ModalClient(Protocol):
    """The Modal calls the runner makes, with Modal's documented behaviour."""

    def configured(self) -> bool:
        """Whether credentials are there at all (no call is made)."""
        ...

    async def spawn(self, app: str, function: str, *args: Any) -> str:
        """``Function.from_name(app, function).spawn(*args)``: the call's ``object_id``."""
        ...

    async def get(self, call_id: str, timeout: float) -> Any:
        """``FunctionCall.from_id(call_id).get(timeout=...)``: TimeoutError while it runs."""
        ...

    async def cancel(self, call_id: str) -> None:
        """``FunctionCall.from_id(call_id).cancel()``."""
        ...

    async def progress(self, call_id: str) -> str | None:
        """The call's latest progress line, if it wrote one."""
        ...


class ModalSDK:
    """The real Modal SDK (its async ``.aio`` interface)."""

    def configured(self) -> bool:
        return bool(modal.config.config.get("token_id") or modal.config.config.get("oauth_refresh_token"))

    async def spawn(self, app: str, function: str, *args: Any) -> str:
        call = await modal.Function.from_name(app, function).spawn.aio(*args)
        return str(call.object_id)

    async def get(self, call_id: str, timeout: float) -> Any:
        try:
            return await modal.FunctionCall.from_id(call_id).get.aio(timeout=timeout)
        except modal.exception.InputCancellation as exc:  # a BaseException: keep it from the pipeline
            raise modal.exception.RemoteError("the call was cancelled") from exc

    async def cancel(self, call_id: str) -> None:
        await modal.FunctionCall.from_id(call_id).cancel.aio()

    async def progress(self, call_id: str) -> str | None:
        line = await modal.Dict.from_name(PROGRESS_DICT, create_if_missing=True).get.aio(call_id)
        return line if isinstance(line, str) else None


@dataclass(frozen=True)
class _Ref:
    """What a re-attach needs: the call, and the result key of the spec it was spawned with."""

    call_id: str
    result_key: str

    def text(self) -> str:
        return f"{REF_PREFIX}{self.call_id}:{self.result_key}"

    @classmethod
    def parse(cls, text: str | None) -> _Ref | None:
        if not text or not text.startswith(REF_PREFIX):
            return None  # none, or another runner's
        call_id, _, key = text[len(REF_PREFIX) :].partition(":")
        return cls(call_id, key) if call_id and key else None


class ModalRunner:
    name = "modal"

    def __init__(self, settings: Settings, *, client: ModalClient | None = None) -> None:
        options = runner_options(settings)
        self._client = client or ModalSDK()
        self._app = str(options["app"])
        self._poll_s = float(options["poll_s"])
        self._max_harness_s = float(options["max_harness_s"])
        self._function_timeout_s = platform_timeout_s(self._max_harness_s, float(options["startup_s"]))
        self._gpus = {name: gpu for name, gpu in settings.gpus.items() if gpu.runner == self.name}
        self._calls: dict[int, str] = {}  # job id -> call id, until the job ends or is cancelled
        self._said_unserved = False
        # Not served for want of credentials is a warning only where the operator asked for Modal
        # (kernelcup.core.config.runner_chosen); else the start's summary line says it is off.
        self._chosen = runner_chosen(settings, self.name)

    def gpus(self) -> list[str]:
        if not self._client.configured():
            if self._gpus and self._chosen and not self._said_unserved:
                self._said_unserved = True  # gpus() is asked often: one line is enough
                log.warning("Modal GPUs not served here: " + self.off_reason(), gpus=sorted(self._gpus))
            return []
        return sorted(name for name, gpu in self._gpus.items() if gpu.options.get("modal_gpu"))

    def off_reason(self) -> str:
        """Why no GPU is served (for the start's summary line)."""
        return "no Modal credentials" if not self._client.configured() else "no GPU entry with modal_gpu"

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        deadline = asyncio.get_running_loop().time() + context.limit_s
        ref = _Ref.parse(context.runner_ref)
        reattached = ref is not None
        if ref is None:
            ref = await self._spawn(spec, context)
        else:
            log.info("re-attaching to a Modal call", call_id=ref.call_id)
        self._calls[context.job_id] = ref.call_id
        await on_progress(Progress("queued"))
        finished = False
        try:
            output = await self._wait(ref, deadline, context, on_progress, expired_ok=reattached)
            if output is _EXPIRED:  # the call ended so long ago that Modal dropped its output
                log.warning("the re-attached Modal call's output expired; running the job again")
                ref = await self._spawn(spec, context)
                self._calls[context.job_id] = ref.call_id
                output = await self._wait(ref, deadline, context, on_progress, expired_ok=False)
            finished = True
        except RunnerError:
            finished = True
            raise
        finally:
            if finished:  # a task the pipeline cancelled keeps its call id for `cancel`
                self._calls.pop(context.job_id, None)
        return self._result(output, ref.result_key, context.gpu)

    async def cancel(self, job_id: int) -> None:
        call_id = self._calls.pop(job_id, None)
        if call_id is not None:
            try:
                await self._client.cancel(call_id)
            except Exception as exc:
                log.warning("cancelling a Modal call failed", call_id=call_id, error=repr(exc))

    async def _spawn(self, spec: JobSpec, context: RunContext) -> _Ref:
        gpu = self._gpus.get(context.gpu)
        if gpu is None or not gpu.options.get("modal_gpu"):
            raise RunnerError(f"GPU {context.gpu!r} has no modal_gpu in the GPU registry (config/kernelcup.yml)")
        if spec.timeout_s > self._max_harness_s:
            raise RunnerError(
                f"this run may take {spec.timeout_s:g} s, more than the {self._max_harness_s:g} s the Modal "
                "functions are deployed for: raise runners.modal.max_harness_s and redeploy (README, GPU runners)"
            )
        function = function_name(context.gpu)
        try:
            call_id = await self._client.spawn(self._app, function, spec.to_json(), remote_kill_s(spec.timeout_s))
        except Exception as exc:
            raise RunnerError(_explain(exc, function, self._app, self._function_timeout_s)) from exc
        ref = _Ref(call_id, spec.result_key)
        self._calls[context.job_id] = call_id  # before any await: a cancel from now on reaches the call
        log.info("spawned a Modal call", call_id=call_id, function=function)
        if context.remember_ref is not None:
            await context.remember_ref(ref.text())
        return ref

    async def _wait(
        self, ref: _Ref, deadline: float, context: RunContext, on_progress: ProgressCallback, *, expired_ok: bool
    ) -> Any:
        """The call's output (``_EXPIRED`` when allowed and Modal no longer has it)."""
        loop = asyncio.get_running_loop()
        last_line: str | None = None
        while True:
            left = deadline - loop.time()
            if left <= 0:
                await self._give_up(ref.call_id)
                raise RunnerError(
                    f"Modal did not return within the runner limit of {context.limit_s:g} s "
                    "(waiting for a free GPU counts too); the call was cancelled",
                    timed_out=True,
                )
            try:
                return await self._client.get(ref.call_id, timeout=min(self._poll_s, left))
            except TimeoutError:  # still running: Modal's get raises the builtin TimeoutError
                pass
            except Exception as exc:
                if expired_ok and _modal_error(exc, "OutputExpiredError"):
                    return _EXPIRED
                message = _explain(exc, function_name(context.gpu), self._app, self._function_timeout_s)
                raise RunnerError(message, timed_out=_modal_error(exc, "FunctionTimeoutError")) from exc
            last_line = await self._forward_progress(ref, last_line, on_progress)

    async def _forward_progress(self, ref: _Ref, last: str | None, on_progress: ProgressCallback) -> str | None:
        try:
            line = await self._client.progress(ref.call_id)
        except Exception as exc:  # progress is a courtesy
            log.debug("reading Modal progress failed", error=repr(exc))
            return last
        if line is None or line == last:
            return last
        event = parse_line(line, ref.result_key)
        if isinstance(event, Progress):
            await on_progress(event)
        return line

    async def _give_up(self, call_id: str) -> None:
        try:
            await self._client.cancel(call_id)
        except Exception as exc:
            log.warning("cancelling a Modal call failed", call_id=call_id, error=repr(exc))

    def _result(self, output: Any, key: str, gpu: str) -> Result:
        if not isinstance(output, dict) or not isinstance(output.get("lines"), list):
            raise RunnerError(f"the Modal function returned {type(output).__name__}, not the harness's output")
        try:
            result = ResultReader(key).read_all(str(line) for line in output["lines"])
        except SpecError as exc:
            raise RunnerError(f"rejected the harness's result line: {exc}") from exc
        if result is None:
            tail = "\n".join(str(output.get("stderr", "")).strip().splitlines()[-20:])
            raise RunnerError(
                f"the harness on Modal exited with code {output.get('returncode')} without a result"
                + (f"; last lines of its stderr:\n{tail}" if tail else "")
            )
        self._check_card(result, gpu)
        return result

    def _check_card(self, result: Result, gpu: str) -> None:
        """Timings from another card must never enter a ranking."""
        config = self._gpus.get(gpu)
        if result.system.device != "cuda" or config is None:
            return
        pattern = str(config.options.get("device_match", f"*{config.card}*"))
        if not fnmatch.fnmatch(result.system.gpu.lower(), pattern.lower()):
            raise RunnerError(
                f"Modal ran this job on {result.system.gpu!r}, not on a {gpu}; its result was discarded"
            )
        # A multi-GPU job: every rank's card (harness/multi_gpu.py names each one).
        for line in result.system.ranks:
            if not fnmatch.fnmatch(line.lower(), pattern.lower()):
                raise RunnerError(f"Modal ran part of this job on another card ({line}), not on a {gpu}; "
                                  "its result was discarded")


def _modal_error(exc: BaseException, name: str) -> bool:
    kind: Callable[..., Any] | None = getattr(modal.exception, name, None)
    return isinstance(kind, type) and isinstance(exc, kind)


def _explain(exc: BaseException, function: str, app: str, function_timeout_s: int) -> str:
    """A Modal failure as one sentence a bot operator (or a user) can act on."""
    errors = modal.exception
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, errors.AuthError):
        return f"Modal refused our credentials ({text}): set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET"
    if isinstance(exc, errors.NotFoundError):
        return (f"Modal function {function} of app {app!r} not found ({text}): "
                "run `modal deploy -m kernelcup.runners.modal_app`")
    if isinstance(exc, errors.ResourceExhaustedError):
        return f"Modal refused the run: a quota or rate limit was reached ({text})"
    if isinstance(exc, errors.FunctionTimeoutError):
        return f"Modal stopped the run at its function timeout of {function_timeout_s} s"
    if isinstance(exc, errors.OutputExpiredError):
        return "the Modal call's output has expired (the run ended too long ago); please resubmit"
    if isinstance(exc, errors.ConnectionError):
        return f"could not reach Modal: {text}"
    lowered = text.lower()
    if "out of memory" in lowered or "oom" in lowered.split() or "memory limit" in lowered:
        return f"the Modal container ran out of memory ({text})"
    if isinstance(exc, errors.Error):
        return f"the Modal container failed: {text}"
    return f"the Modal function raised {type(exc).__name__}: {text}"
