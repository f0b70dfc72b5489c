"""``kernelcup --server URL ...``: the same commands against a real server (uvicorn on
127.0.0.1, a free port) from a real CLI process, with the same progress display and exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcup.core.store.db import make_engine, upgrade
from tests.web.conftest import ALICE, BOB, ROOT, Clock, ScriptedRunner, ServerThread, build_app, token_for

KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    """One server for the module: each CLI run is a process of its own anyway."""
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('remote')}/kernelcup.db")
    upgrade(engine)
    with ServerThread(lambda: build_app(engine, ScriptedRunner(), Clock())) as running:
        yield running
    engine.dispose()


def kernelcup(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCUP_")}
    # No database for the CLI: a remote command must never open the embedded one.
    environ.update({"KERNELCUP_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none", "COLUMNS": "200",
                    **env})
    return subprocess.run([*KERNELCUP, *args], cwd=tmp_path, env=environ, text=True, capture_output=True, timeout=120)


def kernel(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "kernel.py"
    source = (ROOT / "leaderboards/identity/solutions/pytorch.py").read_text()
    path.write_text("#!POPCORN leaderboard identity\n#!POPCORN gpus cpu\n" + source + extra)
    return str(path)


def test_a_remote_submission_is_followed_to_its_report_and_exits_zero(tmp_path: Path, server: ServerThread) -> None:
    assert server.app is not None
    done = kernelcup(tmp_path, "--server", server.url, "submit", "test", kernel(tmp_path),
                     KERNELCUP_TOKEN=token_for(server.app, ALICE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"Submission #\d+ \(test\) of kernel.py accepted", done.stdout)
    assert "[cpu] completed" in done.stdout  # the progress line (the job's state), as in-process
    assert "[cpu] ✅ all tests passed" in done.stdout  # the core's report


def test_a_failing_remote_submission_exits_one(tmp_path: Path, server: ServerThread) -> None:
    assert server.app is not None
    done = kernelcup(tmp_path, "submit", "test", kernel(tmp_path, "\n# WRONG\n"),
                     KERNELCUP_SERVER=server.url, KERNELCUP_TOKEN=token_for(server.app, ALICE))
    assert done.returncode == 1
    assert "❌ a test failed" in done.stdout


def test_remote_reads_and_an_admin_refusal(tmp_path: Path, server: ServerThread) -> None:
    assert server.app is not None
    token = token_for(server.app, BOB)
    listed = kernelcup(tmp_path, "--server", server.url, "list", KERNELCUP_TOKEN=token)
    assert listed.returncode == 0 and "vectoradd" in listed.stdout
    refused = kernelcup(tmp_path, "--server", server.url, "admin", "pause", KERNELCUP_TOKEN=token)
    assert refused.returncode == 1 and "Only admins may use pause." in refused.stdout


def test_without_a_token_the_cli_says_how_to_get_one(tmp_path: Path, server: ServerThread) -> None:
    done = kernelcup(tmp_path, "--server", server.url, "list")
    assert done.returncode == 1
    assert "This needs a personal API token. (401)" in done.stdout and "/leaderboard token" in done.stdout


def test_an_unreachable_server_exits_three_in_one_line(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "--server", "http://127.0.0.1:1", "list", KERNELCUP_TOKEN="kc_x")
    assert done.returncode == 3
    assert "Cannot reach the kernelcup server at http://127.0.0.1:1" in done.stderr
    assert "Traceback" not in done.stderr


def test_remote_json_is_the_apis_reply_and_leaderboard_means_ranked(tmp_path: Path, server: ServerThread) -> None:
    assert server.app is not None
    done = kernelcup(tmp_path, "--server", server.url, "submit", "--json", "--mode", "leaderboard", kernel(tmp_path),
                     KERNELCUP_TOKEN=token_for(server.app, ALICE))
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)  # the report, as GET /api/submissions/{id}/report answers it
    assert document["ok"] is True and isinstance(document["submission_id"], int)
    assert f"Submission #{document['submission_id']}" in document["text"] and "(ranked)" in document["text"]
    assert "[cpu] ✅ all tests passed" in document["text"]


def test_remote_json_keeps_the_exit_codes(tmp_path: Path, server: ServerThread) -> None:
    assert server.app is not None
    refused = kernelcup(tmp_path, "--server", server.url, "admin", "pause", "--json",
                        KERNELCUP_TOKEN=token_for(server.app, BOB))
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["problem"] == {"kind": "forbidden", "retry_after_s": None}
    unreachable = kernelcup(tmp_path, "--server", "http://127.0.0.1:1", "list", "--json", KERNELCUP_TOKEN="kc_x")
    assert unreachable.returncode == 3
    error = json.loads(unreachable.stdout)
    assert error["kind"] == "unavailable" and error["detail"].startswith("Cannot reach the kernelcup server")
