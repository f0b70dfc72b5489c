"""``kernelcup serve`` starts the web adapter by default, on 127.0.0.1; a port in use leaves the
rest of the bot serving."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from structlog.testing import capture_logs

from kernelcup.adapters.web.adapter import WebAdapter
from kernelcup.core.app import Kernelcup
from tests.web.conftest import ROOT, web_settings_of

pytestmark = pytest.mark.slow


def test_the_web_adapter_is_configured_unless_disabled() -> None:
    assert WebAdapter.configured({}) is True
    assert WebAdapter.configured({"KERNELCUP_WEB__ENABLED": "false"}) is False


def test_serve_starts_the_pages_and_api_on_localhost(tmp_path: Path) -> None:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("KERNELCUP_", "SLACK_", "DISCORD_"))},
           "KERNELCUP_DATABASE_URL": f"sqlite:///{tmp_path}/kernelcup.db",
           "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"), "KERNELCUP_WEB__PORT": "0",
           "KERNELCUP_LOGGING__FORMAT": "json"}
    process = subprocess.Popen([sys.executable, "-m", "kernelcup.adapters.terminal", "serve", "--no-console"],
                               cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        assert process.stderr is not None
        while url is None and time.monotonic() < deadline:
            line = process.stderr.readline()
            if not line:
                break
            event = json.loads(line) if line.startswith("{") else {}
            if event.get("event") == "web: serving":
                url = event["url"]
        assert url is not None and url.startswith("http://127.0.0.1:"), "no 'web: serving' line"
        assert "identity" in httpx.get(url, timeout=10).text
        assert httpx.get(url + "api/leaderboards/identity", timeout=10).json()["name"] == "identity"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0


async def test_a_port_in_use_is_logged_and_leaves_the_bot_serving(kc: Kernelcup) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        adapter = WebAdapter(web_settings_of(kc.settings, port=port), {})
        with capture_logs() as logs:
            await adapter.run(kc)  # returns instead of raising SystemExit out of serve
    assert not adapter.ready.is_set()
    assert any(entry["event"] == "web: cannot listen; pages and API are off" for entry in logs)
