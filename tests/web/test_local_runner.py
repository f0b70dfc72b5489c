"""One submission end to end through the real local runner: the harness in a subprocess on the
CPU, submitted and followed over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from kernelcup.adapters.web.app import create_app
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.core.app import Kernelcup
from kernelcup.core.store.db import make_engine, upgrade
from kernelcup.runners.local import LocalRunner
from tests.web.conftest import ALICE, NOW, bearer, make_settings, solution, submit, token_for
from tests.web.test_api_submit import events_of

pytestmark = pytest.mark.slow


@pytest.fixture
async def local_client(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, str]]:
    settings = make_settings()
    engine = make_engine(f"sqlite:///{tmp_path}/kernelcup.db")
    upgrade(engine)
    app = Kernelcup(settings, engine, {"local": LocalRunner(settings)}, clock=lambda: NOW, scheduler=False)
    app.sync_if_empty()
    await app.pipeline.start()
    transport = httpx.ASGITransport(app=create_app(app, WebSettings.load(settings)))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://kernelcup.test") as http:
            yield http, token_for(app, ALICE)
    finally:
        await app.pipeline.stop()
        engine.dispose()


async def test_a_test_submission_runs_in_the_real_harness_and_is_followed_to_its_verdict(
    local_client: tuple[httpx.AsyncClient, str],
) -> None:
    http, token = local_client
    response = await submit(http, token, solution("identity"), gpus=("cpu",))
    assert response.status_code == 202, response.text
    submission_id = response.json()["submission_id"]
    events = events_of((await http.get(f"/api/submissions/{submission_id}/events", timeout=120)).text)
    assert "testing" in [data["phase"] for name, data in events if name == "progress"]
    assert events[-1][1]["passed"] is True
    done = (await http.get(f"/api/submissions/{submission_id}", headers=bearer(token))).json()
    job = done["jobs"][0]
    assert job["verdict"].startswith("all") and all(t["passed"] for t in job["tests"])
    assert job["system"]["device"] == "cpu"
