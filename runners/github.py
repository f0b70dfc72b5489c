"""The GitHub Actions runner: each job is one run of a ``workflow_dispatch`` workflow on a
self-hosted GPU machine (.github/workflows/kernelcup-gpu.yml).

The dispatch carries the job spec (gzip + base64) and a unique id that the workflow puts in its
run name; the runner finds its run by that id, follows it, downloads the result artifact (a
zip with the harness's stdout lines) and checks the signed result line with the spec's key.
The reference kept in the job row (id, run id, key) lets a restarted bot re-attach to the run.
A run that no machine picks up within ``start_timeout_s`` is cancelled with a clear error.

Secrets: only GITHUB_TOKEN, from the environment. Use a private repository: a dispatch's
inputs, the spec with a ranked run's secret seed among them, are visible to its readers.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import io
import json
import math
import os
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import structlog

from kernelcup.core.config import Settings, runner_chosen
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, RunnerError
from kernelcup.core.pipeline.timeouts import platform_timeout_s, remote_kill_s
from kernelcup.harness.spec import JobSpec, Progress, Result, ResultReader, SpecError

log = structlog.get_logger(__name__)

REF_PREFIX = "github:"
ARTIFACT = "kernelcup-result"
LINES_FILE, STDERR_FILE = "harness.jsonl", "harness.stderr"
MAX_INPUTS_CHARS = 60_000  # GitHub refuses dispatch inputs over 65,535 characters in all
DEFAULTS: dict[str, Any] = {
    "repo": "",
    "workflow": "kernelcup-gpu.yml",
    "ref": "main",
    "poll_s": 10.0,
    "start_timeout_s": 600.0,
    "startup_s": 300.0,
    "api_url": "https://api.github.com",
}
STARTED = {"in_progress"}
WAITING = {"queued", "requested", "waiting", "pending"}


@dataclass(frozen=True)
class _Ref:
    """What a re-attach needs: the dispatch's unique id, its run once found, the result key."""

    dispatch_id: str
    run_id: int | None
    result_key: str

    def text(self) -> str:
        return f"{REF_PREFIX}{self.dispatch_id}:{self.run_id or ''}:{self.result_key}"

    @classmethod
    def parse(cls, text: str | None) -> _Ref | None:
        if not text or not text.startswith(REF_PREFIX):
            return None
        parts = text[len(REF_PREFIX) :].split(":")
        if len(parts) != 3 or not parts[0] or not parts[2]:
            return None
        return cls(parts[0], int(parts[1]) if parts[1].isdigit() else None, parts[2])


class GitHubRunner:
    name = "github"

    def __init__(
        self,
        settings: Settings,
        env: Mapping[str, str] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        options = {**DEFAULTS, **settings.runners.get("github", {})}
        self._token = (os.environ if env is None else env).get("GITHUB_TOKEN", "")
        self._repo = str(options["repo"])
        self._workflow = str(options["workflow"])
        self._ref = str(options["ref"])
        self._poll_s = float(options["poll_s"])
        self._start_timeout_s = float(options["start_timeout_s"])
        self._startup_s = float(options["startup_s"])
        self._api_url = str(options["api_url"]).rstrip("/")
        self._transport = transport
        self._gpus = {name: gpu for name, gpu in settings.gpus.items() if gpu.runner == self.name}
        self._refs: dict[int, _Ref] = {}  # job id -> its dispatch, until it ends or is cancelled
        self._said_unserved = False
        # Not served is a warning only where the operator asked for this runner: a GPU entry or
        # setting of theirs names it (kernelcup.core.config.runner_chosen), or a token is set.
        self._chosen = bool(self._token) or runner_chosen(settings, self.name)

    def gpus(self) -> list[str]:
        if not (self._token and self._repo):
            if self._gpus and self._chosen and not self._said_unserved:
                self._said_unserved = True  # gpus() is asked often: one line is enough
                log.warning("GitHub GPUs not served here: " + self.off_reason(), gpus=sorted(self._gpus))
            return []
        return sorted(self._gpus)

    def off_reason(self) -> str:
        """Why no GPU is served (for the start's summary line)."""
        return "set GITHUB_TOKEN and runners.github.repo" if not (self._token and self._repo) else "no GPU entry"

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        deadline = asyncio.get_running_loop().time() + context.limit_s
        finished = False
        async with self._client() as client:
            ref = _Ref.parse(context.runner_ref)
            if ref is None:
                ref = await self._dispatch(client, spec, context)
            else:
                log.info("re-attaching to a GitHub workflow run", dispatch_id=ref.dispatch_id, run_id=ref.run_id)
            self._refs[context.job_id] = ref
            try:
                result = await self._follow(client, ref, deadline, context, on_progress)
                finished = True
                return result
            except RunnerError:
                finished = True
                raise
            finally:
                if finished:  # a task the pipeline cancelled keeps its run for `cancel`
                    self._refs.pop(context.job_id, None)

    async def cancel(self, job_id: int) -> None:
        ref = self._refs.pop(job_id, None)
        if ref is None:
            return
        async with self._client() as client:
            try:
                run = await self._find_run(client, ref) if ref.run_id is None else {"id": ref.run_id}
                if run is not None:
                    await self._cancel_run(client, int(run["id"]))
            except (RunnerError, httpx.HTTPError) as exc:
                log.warning("cancelling a GitHub workflow run failed", dispatch_id=ref.dispatch_id, error=repr(exc))

    # -- the run's life ------------------------------------------------------------------------

    async def _dispatch(self, client: httpx.AsyncClient, spec: JobSpec, context: RunContext) -> _Ref:
        gpu = self._gpus.get(context.gpu)
        labels = gpu.options.get("github_labels") if gpu is not None else None
        if not labels:
            raise RunnerError(f"GPU {context.gpu!r} has no github_labels in the GPU registry (config/kernelcup.yml)")
        workflow = str(gpu.options.get("github_workflow", self._workflow)) if gpu else self._workflow
        ref = _Ref(uuid.uuid4().hex, None, spec.result_key)
        packed = base64.b64encode(gzip.compress(spec.to_json().encode())).decode()
        if len(packed) > MAX_INPUTS_CHARS:
            raise RunnerError(
                f"this job's files are too large for a GitHub dispatch ({len(packed):,} characters packed, "
                f"at most {MAX_INPUTS_CHARS:,}): run it on a Modal or local GPU"
            )
        inputs = {
            "kernelcup_id": ref.dispatch_id,
            "spec": packed,
            "runs_on": json.dumps(list(labels)),
            "timeout_minutes": str(math.ceil(platform_timeout_s(spec.timeout_s, self._startup_s) / 60)),
            "kill_after_s": str(math.ceil(remote_kill_s(spec.timeout_s))),
        }
        path = f"/repos/{self._repo}/actions/workflows/{workflow}/dispatches"
        answer = await self._call(client, "POST", path, json={"ref": self._ref, "inputs": inputs})
        if answer.status_code == 200:  # newer API versions answer with the run's id
            run_id = answer.json().get("workflow_run_id")
            ref = replace(ref, run_id=int(run_id) if run_id else None)
        log.info("dispatched a GitHub workflow run", dispatch_id=ref.dispatch_id, workflow=workflow)
        await self._remember(context, ref)
        return ref

    async def _follow(
        self, client: httpx.AsyncClient, ref: _Ref, deadline: float, context: RunContext, on_progress: ProgressCallback
    ) -> Result:
        loop = asyncio.get_running_loop()
        start_by = loop.time() + self._start_timeout_s
        phase = ""
        while True:
            run = await self._find_run(client, ref) if ref.run_id is None else await self._get_run(client, ref.run_id)
            if run is not None and ref.run_id is None:
                ref = replace(ref, run_id=int(run["id"]))
                self._refs[context.job_id] = ref
                await self._remember(context, ref)
            status = str(run.get("status", "")) if run else ""
            if status == "completed" and run is not None:
                return await self._outcome(client, run, ref, context.gpu)
            now_phase = "compiling" if status in STARTED else "queued"
            if now_phase != phase:
                phase = now_phase
                await on_progress(Progress(phase))
            if phase == "queued" and loop.time() > start_by:
                await self._give_up(client, ref)
                if run is None:
                    raise RunnerError(f"the dispatched workflow run never appeared on GitHub within "
                                      f"{self._start_timeout_s:g} s (is {self._workflow} on {self._ref}?)")
                labels = self._gpus[context.gpu].options.get("github_labels") if context.gpu in self._gpus else []
                raise RunnerError(
                    f"no GitHub runner with labels {labels} picked the job up within {self._start_timeout_s:g} s "
                    "(is the self-hosted runner online?); the run was cancelled"
                )
            if loop.time() > deadline:
                await self._give_up(client, ref)
                raise RunnerError(f"the GitHub workflow run did not finish within the runner limit of "
                                  f"{context.limit_s:g} s; it was cancelled", timed_out=True)
            await asyncio.sleep(self._poll_s)

    async def _outcome(self, client: httpx.AsyncClient, run: dict[str, Any], ref: _Ref, gpu: str) -> Result:
        conclusion, url = run.get("conclusion"), run.get("html_url", "")
        files = await self._artifact(client, int(run["id"]))
        if files is not None:
            try:
                result = ResultReader(ref.result_key).read_all(files.get(LINES_FILE, "").splitlines())
            except SpecError as exc:
                raise RunnerError(f"rejected the harness's result line: {exc}") from exc
            if result is not None:
                return result
        if conclusion == "timed_out":
            raise RunnerError(f"the GitHub workflow job ran past its timeout ({url})", timed_out=True)
        if conclusion == "cancelled":
            raise RunnerError(f"the GitHub workflow run was cancelled ({url})")
        tail = "\n".join((files or {}).get(STDERR_FILE, "").strip().splitlines()[-20:])
        raise RunnerError(
            f"the GitHub workflow run ended ({conclusion}) without a harness result ({url})"
            + (f"; last lines of the harness's stderr:\n{tail}" if tail else "")
        )

    # -- REST calls ----------------------------------------------------------------------------

    def _client(self) -> httpx.AsyncClient:
        headers = {
            "Authorization": f"Bearer {self._token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }
        return httpx.AsyncClient(base_url=self._api_url, headers=headers, timeout=30.0, follow_redirects=True,
                                 transport=self._transport)

    async def _call(self, client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            answer = await client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise RunnerError(f"could not reach GitHub ({self._api_url}): {exc!r}") from exc
        if answer.status_code < 400:
            return answer
        try:
            message = str(answer.json().get("message", ""))
        except ValueError:
            message = answer.text[:200]
        if answer.status_code == 401:
            raise RunnerError(f"GitHub refused GITHUB_TOKEN ({message}): set a token with Actions read/write on "
                              f"{self._repo}")
        if answer.status_code == 404:
            raise RunnerError(f"GitHub answered 404 for {path} ({message}): check runners.github.repo, the workflow "
                              "file and that GITHUB_TOKEN may see the repository")
        if answer.status_code == 403 and answer.headers.get("x-ratelimit-remaining") == "0":
            raise RunnerError("GitHub's API rate limit is used up; raise runners.github.poll_s")
        raise RunnerError(f"GitHub answered {answer.status_code} for {method} {path}: {message}")

    async def _find_run(self, client: httpx.AsyncClient, ref: _Ref) -> dict[str, Any] | None:
        """The run whose name holds our dispatch id (the workflow's run-name puts it there)."""
        path = f"/repos/{self._repo}/actions/workflows/{self._workflow}/runs"
        params = {"event": "workflow_dispatch", "branch": self._ref, "per_page": "50"}
        runs = (await self._call(client, "GET", path, params=params)).json().get("workflow_runs", [])
        for run in runs:
            if ref.dispatch_id in str(run.get("display_title") or run.get("name") or ""):
                return dict(run)
        return None

    async def _get_run(self, client: httpx.AsyncClient, run_id: int) -> dict[str, Any]:
        return dict((await self._call(client, "GET", f"/repos/{self._repo}/actions/runs/{run_id}")).json())

    async def _artifact(self, client: httpx.AsyncClient, run_id: int) -> dict[str, str] | None:
        """The result artifact's files as text; None when the run uploaded none."""
        listing = await self._call(client, "GET", f"/repos/{self._repo}/actions/runs/{run_id}/artifacts")
        found = [a for a in listing.json().get("artifacts", []) if a.get("name") == ARTIFACT and not a.get("expired")]
        if not found:
            return None
        archive = await self._call(client, "GET", f"/repos/{self._repo}/actions/artifacts/{found[0]['id']}/zip")
        try:
            with zipfile.ZipFile(io.BytesIO(archive.content)) as bundle:
                return {name: bundle.read(name).decode(errors="replace") for name in bundle.namelist()}
        except zipfile.BadZipFile as exc:
            raise RunnerError(f"the result artifact of run {run_id} is not a zip: {exc}") from exc

    async def _cancel_run(self, client: httpx.AsyncClient, run_id: int) -> None:
        answer = await client.post(f"/repos/{self._repo}/actions/runs/{run_id}/cancel")
        if answer.status_code not in (202, 409):  # 409: it has already ended
            log.warning("GitHub refused to cancel a run", run_id=run_id, status=answer.status_code)

    async def _give_up(self, client: httpx.AsyncClient, ref: _Ref) -> None:
        try:
            run = {"id": ref.run_id} if ref.run_id is not None else await self._find_run(client, ref)
            if run is not None:
                await self._cancel_run(client, int(run["id"]))
        except (RunnerError, httpx.HTTPError) as exc:
            log.warning("cancelling a GitHub workflow run failed", dispatch_id=ref.dispatch_id, error=repr(exc))

    @staticmethod
    async def _remember(context: RunContext, ref: _Ref) -> None:
        if context.remember_ref is not None:
            await context.remember_ref(ref.text())
