"""`create` from a folder path is the bot's own terminal's, never a token's (issue #37).

A token for a ``console:`` identity (an admin under the shipped roles, ``console:*``) could name a
folder on the server in ``create folder=/etc`` and tell from the answer which folders exist. Over
the web every path — an existing folder, a missing one, a task folder outside the leaderboards
folder or inside it, an attachment named like a folder — gets one answer, and nothing is read.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Request
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard
from tests.web.conftest import ADMIN, ROOT, Clock, ScriptedRunner, bearer, build_app, make_settings, token_for

OPS = Actor("console:ops", "ops")


@pytest.fixture
async def kc(db_engine: Engine, runner: ScriptedRunner, clock: Clock) -> AsyncIterator[Kernelcup]:
    """The shipped roles: every console identity is an admin."""
    settings = replace(make_settings(), roles={"admin": ["console:*", ADMIN.identity], "creator": []})
    app = build_app(db_engine, runner, clock, settings)
    await app.pipeline.start()
    yield app
    await app.pipeline.stop()


def _task_folder_outside(tmp_path: Path) -> Path:
    """A whole, valid leaderboard folder on the server, outside the leaderboards folder."""
    folder = tmp_path / "elsewhere" / "stolen"
    shutil.copytree(ROOT / "leaderboards" / "identity", folder)
    shutil.copy(ROOT / "leaderboards" / "utils.py", folder.parent / "utils.py")
    return folder


def _boards(kc: Kernelcup) -> set[str]:
    with session_scope(kc.engine) as session:
        return set(session.exec(select(Leaderboard.name)).all())


async def test_a_console_token_learns_nothing_of_the_servers_folders(
    kc: Kernelcup, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    token = token_for(kc, OPS)
    outside = _task_folder_outside(tmp_path)
    inside = kc.settings.leaderboards_dir / "identity"
    paths = ["/etc", "/no/such/folder", str(tmp_path / "missing"), str(outside), str(outside.parent),
             str(inside), "leaderboards", "../../../../etc", "/proc/self"]
    before = _boards(kc)
    answers = {}
    for path in paths:
        response = await client.post("/api/commands/create", headers=bearer(token),
                                     json={"folder": path, "name": "probe", "gpu": ["cpu"]})
        answers[path] = (response.status_code, response.json()["text"])
    for path in ("/etc", "leaderboards/identity", str(outside)):  # an attachment named like a folder
        response = await client.post("/api/commands/create", headers=bearer(token), json={
            "name": "probe", "gpu": ["cpu"], "attachments": [{"name": path, "text": "not a task"}]})
        answers[f"attachment {path}"] = (response.status_code, response.json()["text"])

    assert len(set(answers.values())) == 2, "\n".join(f"{k}: {v}" for k, v in answers.items())
    (status, text), = {answers[path] for path in paths}
    assert status == 422 and "Attach the leaderboard's files" in text
    assert not any(path in text for path in paths)
    assert {answers[f"attachment {p}"] for p in ("/etc", "leaderboards/identity", str(outside))} == {
        (422, "There is no task.yml among the files.\n\nA leaderboard folder needs task.yml.")}
    assert _boards(kc) == before  # nothing was read from the server's disk


async def test_the_bots_own_terminal_still_creates_from_a_folder_path(kc: Kernelcup, tmp_path: Path) -> None:
    """The same folder, named by the terminal on this machine (the operator's own files)."""
    outside = _task_folder_outside(tmp_path)
    reply = await kc.handle(Request(OPS, "create", {"folder": str(outside), "gpu": ["cpu"]}, from_this_machine=True))
    assert reply.ok, reply.text()
    assert "stolen" in _boards(kc)
