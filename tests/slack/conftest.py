"""The real Slack adapter (Bolt, slack_sdk, aiohttp) against a local fake Slack, on a real
kernelcup core and database. Requests reach the adapter the way Slack sends them: signed HTTP
POSTs (signature checking on), or envelopes on the Socket Mode websocket."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import shutil
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kernelcup.adapters.slack.adapter import SlackAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.config import Settings, load_settings
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext
from kernelcup.core.store.db import make_engine
from kernelcup.harness.spec import JobSpec, Progress, Result, Status
from kernelcup.runners.local import LocalRunner
from tests.slack.fake_slack import APP_TOKEN, BOT_TOKEN, TEAM, FakeSlack

ROOT = Path(__file__).resolve().parents[2]
SECRET = "test-signing-secret"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
USER, ADMIN, CHANNEL, DM = "U2", "U9", "C1", "D2"


class InstantRunner:
    """The runner's far end answering at once (a passing result), for tests about Slack only."""

    name = "local"

    def __init__(self, gpus: tuple[str, ...] = ("cpu",)) -> None:
        self._gpus = list(gpus)

    def gpus(self) -> list[str]:
        return self._gpus

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        await on_progress(Progress("testing", 1, 1))
        return Result(job_id=spec.job_id, mode=spec.mode, status=Status.PASSED, verdict="all tests passed",
                      score_s=1e-3)

    async def cancel(self, job_id: int) -> None:
        return None


class GatedRunner(InstantRunner):
    """Reports ``steps`` progress events at once, then waits for the test to open the gate."""

    def __init__(self, steps: int = 1) -> None:
        super().__init__()
        self.steps = steps
        self.gate = asyncio.Event()

    async def run(self, spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        for step in range(self.steps):
            await on_progress(Progress("testing", step, self.steps))
        await self.gate.wait()
        return await super().run(spec, context, on_progress)


@pytest.fixture(scope="session")
def leaderboards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped identity leaderboard with one small benchmark, so a ranked run of the real
    harness on the CPU takes seconds; it accepts cpu and H100 (where a runner serves them)."""
    folder = tmp_path_factory.mktemp("leaderboards")
    shutil.copytree(ROOT / "leaderboards" / "identity", folder / "identity")
    shutil.copy(ROOT / "leaderboards" / "utils.py", folder / "utils.py")
    task = folder / "identity" / "task.yml"
    text = re.sub(r"benchmarks:\n(  - .*\n)+", "benchmarks:\n  - {size: 4096, seed: 93246}\n", task.read_text())
    task.write_text(re.sub(r"^gpus: .*$", "gpus: [cpu, H100]", text, flags=re.MULTILINE))
    return folder


def solution(name: str = "pytorch.py") -> bytes:
    return (ROOT / "leaderboards" / "identity" / "solutions" / name).read_bytes()


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    server = FakeSlack()
    await server.start()
    yield server
    await server.close()


def slack_settings(fake: FakeSlack, leaderboards: Path, **section: Any) -> Settings:
    base = load_settings(env={})
    slack = {"api_url": fake.api_url, "host": "127.0.0.1", "port": 0, "update_interval_s": 0.2, **section}
    return replace(
        base,
        leaderboards_dir=leaderboards,
        roles={"admin": ["slack-group:SADMINS"], "creator": []},
        announcements={"slack": {"*": "CANNOUNCE"}},
        sections={**base.sections, "slack": slack},
    )


@dataclass
class Slack:
    """The adapter under test, serving, and ways to send it what Slack would."""

    adapter: SlackAdapter
    app: Kernelcup
    fake: FakeSlack
    url: str

    async def post(self, body: str, content_type: str, *, secret: str = SECRET, ts: int | None = None,
                   signature: str | None = None, signed: bool = True) -> tuple[int, float]:
        """A signed POST as Slack sends it (``signed=False``: with neither signing header); the HTTP
        status and how long the ack took."""
        stamp = str(ts if ts is not None else int(time.time()))
        digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
        headers = {"Content-Type": content_type}
        if signed:
            headers["X-Slack-Request-Timestamp"] = stamp
            headers["X-Slack-Signature"] = signature if signature is not None else f"v0={digest}"
        started = time.monotonic()
        async with aiohttp.ClientSession() as session, session.post(self.url, data=body, headers=headers) as response:
            await response.read()
            return response.status, time.monotonic() - started

    async def command(self, text: str, user: str = USER, **fields: str) -> tuple[int, float]:
        return await self.post(urllib.parse.urlencode(slash_fields(self.fake, text, user, **fields)),
                               "application/x-www-form-urlencoded")

    async def event(self, event: dict[str, Any]) -> tuple[int, float]:
        body = {"token": "legacy", "team_id": TEAM, "api_app_id": "A1", "type": "event_callback",
                "event_id": f"Ev{time.monotonic_ns()}", "event_time": int(time.time()), "event": event}
        return await self.post(json.dumps(body), "application/json")

    async def interaction(self, payload: dict[str, Any]) -> tuple[int, float]:
        return await self.post(urllib.parse.urlencode({"payload": json.dumps(payload)}),
                               "application/x-www-form-urlencoded")

    async def settle(self) -> None:
        """Until every reply the adapter started has been sent. Bolt starts an event's listener
        just after acknowledging it, so a moment passes first."""
        await asyncio.sleep(0.05)
        await self.adapter.idle()


def slash_fields(fake: FakeSlack, text: str, user: str = USER, **fields: str) -> dict[str, str]:
    return {"token": "legacy", "team_id": TEAM, "team_domain": "test", "channel_id": CHANNEL,
            "channel_name": "kernels", "user_id": user, "user_name": f"name-{user}", "command": "/leaderboard",
            "text": text, "api_app_id": "A1", "response_url": fake.response_url(), "trigger_id": "trigger.1",
            **fields}


AppFactory = Callable[..., Any]


@pytest.fixture
async def start(fake: FakeSlack, leaderboards: Path, tmp_path: Path, sqlite_template: Path
                ) -> AsyncIterator[Callable[..., Any]]:
    """``await start(runner=..., env=..., **slack_section)``: a serving adapter on a fresh core."""
    running: list[tuple[SlackAdapter, Kernelcup, Any]] = []

    async def _start(runner: Any = None, env: dict[str, str] | None = None, **section: Any) -> Slack:
        path = tmp_path / f"kernelcup{len(running)}.db"
        shutil.copyfile(sqlite_template, path)
        settings = slack_settings(fake, leaderboards, **section)
        runner = runner or InstantRunner()
        app = Kernelcup(settings, make_engine(f"sqlite:///{path}"), {"local": runner}, clock=lambda: NOW,
                        scheduler=False)
        await app.start()
        adapter = SlackAdapter(settings, env or {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SECRET})
        task = asyncio.create_task(adapter.run(app))
        running.append((adapter, app, task))
        await asyncio.wait_for(adapter.ready.wait(), 10)
        return Slack(adapter, app, fake, f"http://127.0.0.1:{adapter.port}/slack/events")

    yield _start
    for adapter, app, task in running:
        await adapter.stop()
        await task
        await app.stop()
        app.engine.dispose()


def local_runner() -> LocalRunner:
    return LocalRunner(gpu="cpu")


def socket_env() -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}


def file_message(text: str, *files: dict[str, Any], channel: str = DM, channel_type: str = "im") -> dict[str, Any]:
    """A message event as Slack sends it when a user shares files (or just writes, without)."""
    event: dict[str, Any] = {"type": "message", "user": USER, "text": text, "channel": channel,
                             "channel_type": channel_type, "ts": "1699999999.000100", "team": TEAM}
    if files:
        event.update(subtype="file_share", files=list(files))
    return event


def posts_in(fake: FakeSlack, channel: str) -> list[Any]:
    return [c for c in fake.calls_to("chat.postMessage") if c.params["channel"] == channel]
