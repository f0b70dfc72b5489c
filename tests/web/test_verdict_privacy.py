"""What a failed run shows whom, on the real harness.

Alice's submissions fail in the real harness (the local runner, a subprocess on the CPU) with an
exception that quotes a marker from their own source: one raises ``ValueError(MARKER)`` in
``custom_kernel``, one names an undefined ``MARKER_NAME`` when it is imported. Every surface is
read anonymously and as Bob (by token and by a signed-in browser's cookie): the API, the pages,
the live event stream while the jobs run, the ``get-submission`` chat command (Discord, Slack and
console identities) and the remote terminal. Neither marker reaches them; Alice and an admin see
it. The rule is ``kernelcup.core.access.visibility`` (SECURITY.md, *What a submission shows whom*).
The final standings' side is ``tests/scheduling/test_local_runner.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import Engine

from kernelcup.adapters.web.auth import COOKIE
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Request
from kernelcup.core.store.db import make_engine, upgrade
from kernelcup.runners.local import LocalRunner
from tests.web.conftest import ADMIN, ALICE, BOB, Clock, ServerThread, bearer, make_settings, token_for
from tests.web.test_api_submit import events_of
from tests.web.test_remote_cli import kernelcup
from tests.web.test_signin import sign_in

pytestmark = pytest.mark.slow

MARKER = "SECRET-MARKER-123"
MARKER_NAME = "SECRET_MARKER_456"
RAISES = f'''#!POPCORN leaderboard identity
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    raise ValueError("{MARKER}")
'''
FAILS_TO_IMPORT = f'''#!POPCORN leaderboard identity
from task import input_t, output_t

limit = {MARKER_NAME}


def custom_kernel(data: input_t) -> output_t:
    return data[1]
'''
SECRETS = (MARKER, MARKER_NAME)
# Chat users other than Alice, as Discord, Slack and the console name them.
OTHERS_IN_CHAT = (BOB, Actor("slack:T1/U9", "carol"), Actor("console:eve", "eve"))


@dataclass
class Run:
    """The server, the two failed submissions, and what each viewer's live stream carried."""

    server: ServerThread
    engine: Engine
    alice: str
    bob: str
    admin: str
    bob_session: str
    alice_id: int
    submissions: dict[str, int]  # "raises" / "import" -> id
    streams: dict[tuple[str, str], str]  # (submission kind, viewer) -> the event stream's text


def _app(engine: Engine) -> Kernelcup:
    settings = make_settings()
    app = Kernelcup(settings, engine, {"local": LocalRunner(settings)}, clock=Clock(), scheduler=False)
    app.sync_if_empty()
    return app


async def _submit_and_watch(url: str, alice: str, bob: str) -> tuple[dict[str, int], dict[tuple[str, str], str]]:
    """Alice submits both; anyone, Bob and Alice follow each live, from its start to its end."""
    async with httpx.AsyncClient(base_url=url, timeout=300) as http:
        submissions = {}
        for kind, code in (("raises", RAISES), ("import", FAILS_TO_IMPORT)):
            response = await http.post("/api/submissions", headers=bearer(alice),
                                       data={"mode": "test", "leaderboard": "identity", "gpu": ["cpu"]},
                                       files={"file": (f"{kind}.py", code.encode(), "text/x-python")})
            assert response.status_code == 202, response.text
            submissions[kind] = int(response.json()["submission_id"])
        viewers = {"anyone": {}, "bob": bearer(bob), "alice": bearer(alice)}

        async def watch(kind: str, viewer: str) -> tuple[tuple[str, str], str]:
            response = await http.get(f"/api/submissions/{submissions[kind]}/events", headers=viewers[viewer])
            assert response.status_code == 200, response.text
            return (kind, viewer), response.text

        streams = dict(await asyncio.gather(*(watch(kind, viewer) for kind in submissions for viewer in viewers)))
    return submissions, streams


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    engine = make_engine(f"sqlite:///{tmp_path_factory.mktemp('verdicts')}/kernelcup.db")
    upgrade(engine)
    with ServerThread(lambda: _app(engine)) as server:
        assert server.app is not None
        alice, bob, admin = (token_for(server.app, actor) for actor in (ALICE, BOB, ADMIN))
        submissions, streams = asyncio.run(_submit_and_watch(server.url, alice, bob))

        async def session_and_id() -> tuple[str, int]:
            async with httpx.AsyncClient(base_url=server.url) as http:
                me = (await http.get("/api/me", headers=bearer(alice))).json()
                return await sign_in(http, bob), int(me["user_id"])

        bob_session, alice_id = asyncio.run(session_and_id())
        yield Run(server, engine, alice, bob, admin, bob_session, alice_id, submissions, streams)
    engine.dispose()


def _get(run: Run, path: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.get(run.server.url + path, headers=headers or {}, timeout=30)


def _others(run: Run) -> dict[str, dict[str, str]]:
    return {"anyone": {}, "bob (token)": bearer(run.bob), "bob (signed in)": {"Cookie": f"{COOKIE}={run.bob_session}"}}


def _assert_no_secret(text: str, where: object) -> None:
    for secret in SECRETS:
        assert secret not in text, (where, secret)


def test_the_runs_failed_in_the_real_harness_quoting_the_marker(run: Run) -> None:
    """The premise: the harness's own verdicts quote the source, and the author reads them."""
    for kind, secret in (("raises", MARKER), ("import", MARKER_NAME)):
        own = _get(run, f"/api/submissions/{run.submissions[kind]}", bearer(run.alice)).json()
        assert own["finished"] is True and own["passed"] is False, own
        assert secret in own["jobs"][0]["verdict"], own["jobs"][0]


@pytest.mark.parametrize("kind", ["raises", "import"])
def test_the_api_shows_others_the_status_but_no_exception_text(run: Run, kind: str) -> None:
    sid = run.submissions[kind]
    paths = [f"/api/submissions/{sid}", f"/api/submissions/{sid}/report", f"/api/submissions?user_id={run.alice_id}",
             "/api/submissions?leaderboard=identity", f"/api/users/{run.alice_id}",
             "/api/leaderboards/identity/rankings"]
    for viewer, headers in _others(run).items():
        for path in paths:
            response = _get(run, path, headers)
            assert response.status_code in (200, 403), (viewer, path, response.text)
            _assert_no_secret(response.text, (viewer, path))
        seen = _get(run, f"/api/submissions/{sid}", headers).json()
        job = seen["jobs"][0]
        assert (seen["finished"], seen["passed"], job["state"]) == (True, False, "completed"), seen
        # The public facts: which leaderboard, GPU and mode, and how the run ended.
        assert (seen["leaderboard"], job["gpu"], seen["mode"]) == ("identity", "cpu", "test")
        assert job["verdict"] == ("crashed" if kind == "raises" else "compile error"), job
        assert job["logs"] is None and seen["code"] is None


@pytest.mark.parametrize("kind", ["raises", "import"])
def test_the_pages_show_others_no_exception_text(run: Run, kind: str) -> None:
    sid = run.submissions[kind]
    for viewer, headers in _others(run).items():
        for path in (f"/submissions/{sid}", f"/users/{run.alice_id}", "/leaderboards/identity"):
            response = _get(run, path, headers)
            assert response.status_code == 200, (viewer, path)
            _assert_no_secret(response.text, (viewer, path))
        page = _get(run, f"/submissions/{sid}", headers).text
        assert ("crashed" if kind == "raises" else "compile error") in page


def test_the_live_event_stream_shows_others_no_exception_text(run: Run) -> None:
    for (kind, viewer), text in run.streams.items():
        if viewer == "alice":
            continue
        _assert_no_secret(text, (kind, viewer))
        events = events_of(text)
        assert events[-1][0] == "done" and events[-1][1]["passed"] is False, (kind, viewer, events)
        assert [data["phase"] for name, data in events if name == "progress"][-1] == "done"
    # ...and a stream opened after the end says the same.
    for viewer, headers in _others(run).items():
        for kind, sid in run.submissions.items():
            _assert_no_secret(_get(run, f"/api/submissions/{sid}/events", headers).text, (kind, viewer, "late"))


async def _ask(engine: Engine, actor: Actor, submission_id: int) -> str:
    """``get-submission`` as a chat adapter asks it: a bot process of its own on the same database
    (Discord, Slack and the console build the same Request and render the Reply)."""
    bot = Kernelcup(make_settings(), engine, {}, clock=Clock(), scheduler=False)
    reply = await bot.handle(Request(actor=actor, command="get-submission", args={"id": submission_id},
                                     reply_to="chat"))
    assert reply.ok, reply.text()
    return json.dumps([repr(block) for block in reply.blocks]) + reply.text()


async def test_get_submission_in_chat_shows_others_no_exception_text(run: Run) -> None:
    for kind, sid in run.submissions.items():
        for actor in OTHERS_IN_CHAT:
            seen = await _ask(run.engine, actor, sid)
            _assert_no_secret(seen, (kind, actor.identity))
            assert "❌" in seen and ("crashed" if kind == "raises" else "compile error") in seen


def test_the_remote_terminal_shows_another_user_no_exception_text(run: Run, tmp_path: Path) -> None:
    sid = run.submissions["raises"]
    other = kernelcup(tmp_path, "--server", run.server.url, "get-submission", str(sid), KERNELCUP_TOKEN=run.bob)
    assert other.returncode == 0, other.stdout + other.stderr
    _assert_no_secret(other.stdout + other.stderr, "bob's terminal")
    assert "crashed" in other.stdout
    saved = "".join(path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file())
    _assert_no_secret(saved, "files the terminal saved for bob")
    own = kernelcup(tmp_path, "--server", run.server.url, "get-submission", str(sid), KERNELCUP_TOKEN=run.alice)
    assert own.returncode == 0 and MARKER in own.stdout, own.stdout + own.stderr


@pytest.mark.parametrize("who", ["alice", "admin"])
async def test_the_author_and_admins_see_the_exception_text_everywhere(run: Run, who: str) -> None:
    token = getattr(run, who)
    actor = {"alice": ALICE, "admin": ADMIN}[who]
    for kind, secret in (("raises", MARKER), ("import", MARKER_NAME)):
        sid = run.submissions[kind]
        seen = _get(run, f"/api/submissions/{sid}", bearer(token)).json()
        assert secret in seen["jobs"][0]["verdict"] and secret in seen["code"]
        assert secret in _get(run, f"/api/submissions/{sid}/report", bearer(token)).text
        assert secret in await _ask(run.engine, actor, sid)
    async with httpx.AsyncClient(base_url=run.server.url) as http:
        cookie = await sign_in(http, token)
    page = _get(run, f"/submissions/{run.submissions['raises']}", {"Cookie": f"{COOKIE}={cookie}"})
    assert MARKER in page.text

