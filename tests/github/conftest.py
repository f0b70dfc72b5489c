"""The real GitHub adapter (Starlette on uvicorn, httpx) against a local fake GitHub REST API, on
a real kernelcup core and database. Deliveries reach it as GitHub sends them: signed POSTs with
X-GitHub-Event and X-GitHub-Delivery headers."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from kernelcup.adapters.github.adapter import GitHubAdapter
from kernelcup.adapters.github.signature import sign
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.core.store.db import make_engine
from kernelcup.harness.spec import JobSpec, Progress, Result, Status
from tests.github.fake_github import TOKEN, FakeGitHub

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-webhook-secret"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
REPO = "team/kernels"
ENV = {"GITHUB_WEBHOOK_SECRET": SECRET, "GITHUB_BOT_TOKEN": TOKEN}


class ScriptedRunner:
    """The runner's far end answering at once: a pass, or a wrong answer where the submission
    says ``WRONG``. With ``gate`` set, each job reports progress and waits for the test."""

    name = "local"

    def __init__(self) -> None:
        self.gate: asyncio.Event | None = None
        self.specs: list[JobSpec] = []

    def gpus(self) -> list[str]:
        return ["cpu"]

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        self.specs.append(spec)
        await on_progress(Progress("testing", 1, 2))
        if self.gate is not None:
            await self.gate.wait()
        if "WRONG" in spec.files[spec.submission_name]:
            return Result(job_id=spec.job_id, mode=spec.mode, status=Status.FAILED,
                          verdict="test 2 failed: mismatch at index 7", stdout="printed by the kernel\n")
        return Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="all tests passed",
                      score_s=1e-3)

    async def cancel(self, job_id: int) -> None:
        return None


@pytest.fixture(scope="session")
def leaderboards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped vectoradd leaderboard, run on the CPU only (one GPU: no choice to ask for)."""
    folder = tmp_path_factory.mktemp("leaderboards")
    shutil.copytree(ROOT / "leaderboards" / "vectoradd", folder / "vectoradd")
    shutil.copy(ROOT / "leaderboards" / "utils.py", folder / "utils.py")
    task = folder / "vectoradd" / "task.yml"
    task.write_text(re.sub(r"^gpus: .*$", "gpus: [cpu]", task.read_text(), flags=re.MULTILINE))
    return folder


def solution(name: str = "pytorch.py") -> bytes:
    return (ROOT / "leaderboards" / "vectoradd" / "solutions" / name).read_bytes()


@pytest.fixture
async def fake() -> AsyncIterator[FakeGitHub]:
    server = FakeGitHub()
    await server.start()
    yield server
    await server.close()


def github_settings(fake: FakeGitHub, leaderboards: Path, **section: Any) -> Settings:
    base = load_settings(env={})
    github = {"api_url": fake.url, "host": "127.0.0.1", "port": 0, "update_interval_s": 0.05, **section}
    return replace(base, leaderboards_dir=leaderboards, roles={"admin": ["github:octo-admin"], "creator": []},
                   sections={**base.sections, "github": github})


@dataclass
class GitHub:
    """The adapter under test, serving, and ways to send it what GitHub would."""

    adapter: GitHubAdapter
    app: Kernelcup
    fake: FakeGitHub
    runner: ScriptedRunner
    url: str

    async def deliver(self, event: str, payload: dict[str, Any], *, delivery: str | None = None,
                      secret: str = SECRET, signature: str | None = None, signed: bool = True) -> int:
        body = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json", "X-GitHub-Event": event,
                   "X-GitHub-Delivery": delivery or str(uuid.uuid4())}
        if signed:
            headers["X-Hub-Signature-256"] = signature if signature is not None else sign(secret, body)
        async with httpx.AsyncClient() as client:
            response = await client.post(self.url, content=body, headers=headers)
        return response.status_code

    async def settle(self) -> None:
        """Until every delivery's work (and the submissions it follows) has ended."""
        await asyncio.sleep(0.05)
        await self.adapter.idle()


def pull_event(action: str, pull: dict[str, Any]) -> dict[str, Any]:
    return {"action": action, "number": pull["number"], "pull_request": pull,
            "repository": {"full_name": pull["base"]["repo"]["full_name"]}, "sender": pull["user"]}


def comment_event(pull: dict[str, Any], body: str, login: str, association: str = "CONTRIBUTOR") -> dict[str, Any]:
    return {"action": "created",
            "issue": {"number": pull["number"], "pull_request": {"url": "…"}, "user": pull["user"]},
            "comment": {"id": 9, "body": body, "user": {"login": login, "type": "User"},
                        "author_association": association},
            "repository": {"full_name": pull["base"]["repo"]["full_name"]}, "sender": {"login": login}}


@pytest.fixture
async def start(fake: FakeGitHub, leaderboards: Path, tmp_path: Path, sqlite_template: Path
                ) -> AsyncIterator[Callable[..., Any]]:
    """``await start(env=..., database=..., **github_section)``: a serving adapter on a fresh core."""
    running: list[tuple[GitHubAdapter, Kernelcup, Any]] = []

    async def _start(env: dict[str, str] | None = None, database: Path | None = None, **section: Any) -> GitHub:
        path = database or tmp_path / f"kernelcup{len(running)}.db"
        if not path.exists():
            shutil.copyfile(sqlite_template, path)
        settings = github_settings(fake, leaderboards, **section)
        runner = ScriptedRunner()
        app = Kernelcup(settings, make_engine(f"sqlite:///{path}"), {"local": runner}, clock=lambda: NOW,
                        scheduler=False)
        await app.start()
        adapter = GitHubAdapter(settings, ENV if env is None else env)
        task = asyncio.create_task(adapter.run(app))
        running.append((adapter, app, task))
        await asyncio.wait_for(adapter.ready.wait(), 10)
        return GitHub(adapter, app, fake, runner, f"http://127.0.0.1:{adapter.port}/github/webhook")

    yield _start
    for adapter, app, task in running:
        await adapter.stop()
        await task
        await app.stop()
        app.engine.dispose()
