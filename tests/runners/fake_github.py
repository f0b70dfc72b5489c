"""A local fake of the GitHub REST API calls the GitHub runner makes (aiohttp on 127.0.0.1).

``POST .../workflows/{wf}/dispatches`` creates a run named after the workflow's ``run-name``
(``kernelcup job <kernelcup_id>``); each run then follows its ``Plan``: queued, in progress,
completed with a conclusion and, unless the plan says otherwise, a ``kernelcup-result``
artifact whose zip holds the harness's stdout lines. What the "machine" does is ``Plan.work``:
scripted harness output, or the workflow file's real harness step run with bash.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import io
import itertools
import json
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from kernelcup.harness.spec import Mode, Result, Status, SystemInfo, result_line

TOKEN = "ghp_test_token"
REPO = "kernelcup/gpus"
WORKFLOW = "kernelcup-gpu.yml"
WORKFLOW_FILE = Path(__file__).resolve().parents[2] / ".github" / "workflows" / WORKFLOW

Work = Callable[[dict[str, str]], Awaitable[dict[str, str]]]  # dispatch inputs -> artifact files


@dataclass
class Plan:
    start_after_s: float = 0.0
    run_s: float = 0.0
    conclusion: str = "success"
    artifact: bool = True
    never_starts: bool = False  # no machine with these labels is online
    work: Work | None = None  # None: a passing result signed with the spec's key


@dataclass
class Run:
    id: int
    inputs: dict[str, str]
    status: str = "queued"
    conclusion: str | None = None
    artifact: bytes | None = None
    task: asyncio.Task[None] | None = None

    def json(self, repo: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": "kernelcup-gpu",
            "display_title": f"kernelcup job {self.inputs.get('kernelcup_id', '')}",
            "event": "workflow_dispatch",
            "status": self.status,
            "conclusion": self.conclusion,
            "html_url": f"https://github.com/{repo}/actions/runs/{self.id}",
        }


@dataclass
class FakeGitHub:
    plan: Plan = field(default_factory=Plan)
    runs: dict[int, Run] = field(default_factory=dict)
    cancelled: list[int] = field(default_factory=list)
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(9000))

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        base = f"/repos/{REPO}/actions"
        app.router.add_post(f"{base}/workflows/{{workflow}}/dispatches", self._dispatch)
        app.router.add_get(f"{base}/workflows/{{workflow}}/runs", self._list_runs)
        app.router.add_get(f"{base}/runs/{{run_id}}", self._get_run)
        app.router.add_get(f"{base}/runs/{{run_id}}/artifacts", self._artifacts)
        app.router.add_get(f"{base}/artifacts/{{artifact_id}}/zip", self._download)
        app.router.add_get("/blobs/{artifact_id}", self._blob)
        app.router.add_post(f"{base}/runs/{{run_id}}/cancel", self._cancel)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                    ) -> web.StreamResponse:
        if request.path.startswith("/repos/") and request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"message": "Bad credentials"}, status=401)
        if request.path.startswith("/repos/") and not request.path.startswith(f"/repos/{REPO}/"):
            return web.json_response({"message": "Not Found"}, status=404)
        return await handler(request)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["workflow"] != WORKFLOW:
            return web.json_response({"message": "Not Found"}, status=404)
        body = await request.json()
        self.dispatches.append(body)
        run = Run(next(self._ids), dict(body["inputs"]))
        self.runs[run.id] = run
        run.task = asyncio.create_task(self._advance(run, self.plan))
        return web.Response(status=204)

    async def _advance(self, run: Run, plan: Plan) -> None:
        if plan.never_starts:
            return
        await asyncio.sleep(plan.start_after_s)
        run.status = "in_progress"
        files = await (plan.work or signed_result())(run.inputs)
        await asyncio.sleep(plan.run_s)
        if plan.artifact:
            run.artifact = _zip(files)
        run.status, run.conclusion = "completed", plan.conclusion

    async def _list_runs(self, request: web.Request) -> web.StreamResponse:
        runs = sorted(self.runs.values(), key=lambda r: r.id, reverse=True)  # newest first, as GitHub lists
        return web.json_response({"total_count": len(runs), "workflow_runs": [r.json(REPO) for r in runs]})

    def _run(self, request: web.Request) -> Run | None:
        return self.runs.get(int(request.match_info["run_id"]))

    async def _get_run(self, request: web.Request) -> web.StreamResponse:
        run = self._run(request)
        if run is None:
            return web.json_response({"message": "Not Found"}, status=404)
        return web.json_response(run.json(REPO))

    async def _artifacts(self, request: web.Request) -> web.StreamResponse:
        run = self._run(request)
        artifacts = [] if run is None or run.artifact is None else [
            {"id": run.id * 10, "name": "kernelcup-result", "expired": False, "size_in_bytes": len(run.artifact)}
        ]
        return web.json_response({"total_count": len(artifacts), "artifacts": artifacts})

    async def _download(self, request: web.Request) -> web.StreamResponse:
        # GitHub answers with a redirect to short-lived blob storage.
        raise web.HTTPFound(f"/blobs/{request.match_info['artifact_id']}")

    async def _blob(self, request: web.Request) -> web.StreamResponse:
        run = self.runs[int(request.match_info["artifact_id"]) // 10]
        assert run.artifact is not None
        return web.Response(body=run.artifact, content_type="application/zip")

    async def _cancel(self, request: web.Request) -> web.StreamResponse:
        run = self._run(request)
        if run is None:
            return web.json_response({"message": "Not Found"}, status=404)
        if run.status == "completed":
            return web.json_response({"message": "Cannot cancel a workflow run that is completed."}, status=409)
        self.cancelled.append(run.id)
        if run.task is not None:
            run.task.cancel()
        run.status, run.conclusion = "completed", "cancelled"
        return web.json_response({}, status=202)

    async def close(self) -> None:
        tasks = [run.task for run in self.runs.values() if run.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def unpack_spec(inputs: dict[str, str]) -> dict[str, Any]:
    return dict(json.loads(gzip.decompress(base64.b64decode(inputs["spec"]))))


def pack_spec(spec: dict[str, Any]) -> str:
    return base64.b64encode(gzip.compress(json.dumps(spec).encode())).decode()


def signed_result(status: Status = Status.PASSED, gpu: str = "NVIDIA GeForce RTX 4090") -> Work:
    """The machine plays the harness: one result line signed with the spec's key."""

    async def work(inputs: dict[str, str]) -> dict[str, str]:
        spec = unpack_spec(inputs)
        result = Result(spec["job_id"], Mode(spec["mode"]), status, "all tests passed", score_s=1e-3,
                        system=SystemInfo(device="cuda", gpu=gpu))
        return {"harness.jsonl": result_line(result, spec["result_key"]) + "\n", "harness.stderr": ""}

    return work


async def workflow_step(inputs: dict[str, str], extra_env: dict[str, str] | None = None) -> dict[str, str]:
    """The machine runs the workflow file's own harness step with bash: the real harness, with
    ``extra_env`` in the step's environment (as a machine's operator would set it)."""
    [job] = yaml.safe_load(WORKFLOW_FILE.read_text())["jobs"].values()
    [step] = [s for s in job["steps"] if s.get("name") == "Run the harness"]
    [checkout] = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout")]
    with tempfile.TemporaryDirectory() as temp:
        # The sparse checkout (cone mode: whole folders, links kept as links), so a folder the
        # harness needs and the workflow forgets fails here as it would on the machine.
        workspace = Path(temp) / "workspace"
        for folder in checkout["with"]["sparse-checkout"].split():
            shutil.copytree(WORKFLOW_FILE.parents[2] / folder, workspace / folder, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        env = {
            "PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", temp), "RUNNER_TEMP": temp,
            "GITHUB_WORKSPACE": str(workspace), "SPEC": inputs["spec"],
            "KILL_AFTER_S": inputs["kill_after_s"], "HARNESS_PYTHON": _machine_python(Path(temp)),
            **(extra_env or {}),
        }
        process = await asyncio.create_subprocess_exec("bash", "-e", "-c", step["run"], env=env)
        await process.wait()
        out = Path(temp) / "kernelcup-out"
        return {path.name: path.read_text() for path in out.iterdir()}


def _machine_python(folder: Path) -> str:
    """This Python as the GPU machine's, which has torch but not kernelcup: ``python -m X`` with
    the editable install's finder removed, so only the checked-out workspace can provide X."""
    script = folder / "machine-python"
    code = ("import runpy, sys; "
            "sys.meta_path[:] = [f for f in sys.meta_path if '__editable__' not in getattr(f, '__module__', '')]; "
            "assert sys.argv[1] == '-m'; sys.argv = [sys.argv[2], *sys.argv[3:]]; "
            "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)")
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{code}" "$@"\n')
    script.chmod(0o755)
    return str(script)


def _zip(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for name, text in files.items():
            bundle.writestr(name, text)
    return buffer.getvalue()
