"""No endpoint ever returns a secret seed or someone else's private code; code and logs are the
author's and the admins' until the deadline, then everyone's if the leaderboard allows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlmodel import select

from kernelcup.adapters.web.app import create_app
from kernelcup.adapters.web.auth import COOKIE
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import commands
from kernelcup.core.commands.registry import Kind
from kernelcup.core.pipeline.runner import ProgressCallback, RunContext, RunnerError
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard
from kernelcup.harness.spec import JobSpec, Progress, Result
from tests.web.conftest import ALICE, Clock, ScriptedRunner, Tokens, bearer, finish, solution, submit
from tests.web.test_signin import sign_in

MARKER = b"# ALICE-PRIVATE-MARKER-93c1\n"
HOSTNAME = "runner-host-7"  # what ScriptedRunner reports as the runner machine


@pytest.fixture
async def alice_submission(client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens) -> int:
    response = await submit(client, tokens.alice, solution() + MARKER + b"# score: 0.002\n", mode="ranked")
    submission_id: int = response.json()["submission_id"]
    await finish(kc, submission_id)
    return submission_id


def _keep_code_private_and_pass_the_deadline(kc: Kernelcup, clock: Clock) -> None:
    """identity says its code stays private after the deadline, and the deadline is long past."""
    with session_scope(kc.engine) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == "identity")).one()
        board.task_json = json.dumps({**json.loads(board.task_json), "code_public_after_deadline": False})
        session.add(board)
    clock.now += timedelta(days=400)


def seeds(kc: Kernelcup) -> list[str]:
    with session_scope(kc.engine) as session:
        return [str(seed) for seed in session.exec(select(Leaderboard.secret_seed)).all()]


def args_for(kind: Kind, many: bool, choices: tuple[str, ...], submission_id: int) -> Any:
    value: Any = {
        Kind.INT: submission_id, Kind.LEADERBOARD: "identity", Kind.USER: ALICE.identity, Kind.GPU: "cpu",
        Kind.WHEN: "+1d", Kind.FLAG: True, Kind.TEXT: "identity",
    }.get(kind, choices[0] if choices else None)
    return [value] if many and value is not None else value


def calls(paths: dict[str, Any], submission_id: int, user_id: int) -> list[tuple[str, str, dict[str, Any]]]:
    """One plausible request per operation of the OpenAPI schema, aimed at Alice's things."""
    by_name = {f"/api/commands/{c.name}": c for c in commands()}
    out = []
    for path, operations in paths.items():
        url = path.format(name="identity", submission_id=submission_id, user_id=user_id)
        for method in operations:
            kwargs: dict[str, Any] = {}
            if path in by_name:
                cmd = by_name[path]
                body = {p.name: args_for(p.kind, p.many, p.choices, submission_id) for p in cmd.params
                        if p.kind not in (Kind.FILE, Kind.FOLDER)}
                if cmd.name == "submit":
                    body["attachments"] = [{"name": "mine.py", "text": solution().decode()}]
                kwargs["json"] = body
            elif path == "/api/submissions" and method == "post":
                kwargs = {"data": {"mode": "test", "gpu": ["cpu"]}, "files": {"file": ("mine.py", solution())}}
            elif path.endswith("/history"):
                kwargs["params"] = {"gpu": "cpu"}
            out.append((method.upper(), url, kwargs))
    return out


async def test_no_endpoint_or_page_leaks_a_seed_or_alices_code(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens, alice_submission: int
) -> None:
    alice_id = (await client.get("/api/me", headers=bearer(tokens.alice))).json()["user_id"]
    paths = (await client.get("/openapi.json")).json()["paths"]
    requests = calls(paths, alice_submission, alice_id)
    pages = ["/", "/leaderboards/identity", f"/submissions/{alice_submission}", f"/users/{alice_id}", "/signin"]
    requests += [("GET", page, {}) for page in pages]
    secrets = [*seeds(kc), MARKER.decode().strip(), HOSTNAME]
    answered = 0
    bob_session = await sign_in(client, tokens.bob)
    client.cookies.clear()  # the session goes in the header below, for some requests only
    for method, url, kwargs in requests:
        for auth in ({}, bearer(tokens.bob), {"Cookie": f"{COOKIE}={bob_session}"}):
            response = await client.request(method, url, headers=auth, **kwargs)
            answered += response.status_code < 400
            for secret in secrets:
                assert secret not in response.text, (method, url, auth, secret)
    assert answered > 40  # most requests got a real answer, so the walk proves something
    own = await client.get(f"/api/submissions/{alice_submission}", headers=bearer(tokens.alice))
    assert MARKER.decode().strip() in own.text  # ...and the marker is there for the author


async def test_others_see_verdict_and_timings_but_not_code_or_logs(
    client: httpx.AsyncClient, tokens: Tokens, alice_submission: int
) -> None:
    seen = (await client.get(f"/api/submissions/{alice_submission}", headers=bearer(tokens.bob))).json()
    assert seen["passed"] is True and seen["jobs"][0]["benchmarks"]
    assert (seen["code_visible"], seen["code"], seen["jobs"][0]["logs"]) == (False, None, None)
    report = await client.get(f"/api/submissions/{alice_submission}/report", headers=bearer(tokens.bob))
    assert report.status_code == 403


@pytest.mark.parametrize("who", ["alice", "admin"])
async def test_the_author_and_admins_see_code_and_logs_before_the_deadline(
    client: httpx.AsyncClient, tokens: Tokens, alice_submission: int, who: str
) -> None:
    seen = (await client.get(f"/api/submissions/{alice_submission}", headers=bearer(getattr(tokens, who)))).json()
    assert seen["code_visible"] is True and MARKER.decode() in seen["code"]
    assert seen["jobs"][0]["logs"] == {"stdout": "printed by the kernel\n"}


async def test_after_the_deadline_everyone_sees_the_code(
    client: httpx.AsyncClient, clock: Clock, alice_submission: int
) -> None:
    clock.now += timedelta(days=400)
    seen = (await client.get(f"/api/submissions/{alice_submission}")).json()
    assert seen["code_visible"] is True and MARKER.decode() in seen["code"]


async def test_a_leaderboard_can_keep_its_code_private_after_the_deadline(
    client: httpx.AsyncClient, kc: Kernelcup, clock: Clock, alice_submission: int
) -> None:
    _keep_code_private_and_pass_the_deadline(kc, clock)
    seen = (await client.get(f"/api/submissions/{alice_submission}")).json()
    assert seen["code_visible"] is False and seen["code"] is None


@pytest.fixture
async def strict_client(kc: Kernelcup) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(kc, WebSettings(code_public_after_deadline=False))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kernelcup.test") as http:
        yield http


async def test_the_web_config_can_keep_code_private_after_the_deadline(
    strict_client: httpx.AsyncClient, clock: Clock, alice_submission: int
) -> None:
    clock.now += timedelta(days=400)
    seen = (await strict_client.get(f"/api/submissions/{alice_submission}")).json()
    assert seen["code_visible"] is False


async def test_a_submission_on_a_hidden_leaderboard_is_unknown_to_others(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens, alice_submission: int
) -> None:
    with session_scope(kc.engine) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == "identity")).one()
        board.visibility = "hidden"
        session.add(board)
    assert (await client.get(f"/api/submissions/{alice_submission}", headers=bearer(tokens.bob))).status_code == 404
    assert (await client.get(f"/api/submissions/{alice_submission}", headers=bearer(tokens.alice))).status_code == 200


async def _get_submission(client: httpx.AsyncClient, token: str, submission_id: int) -> dict[str, Any]:
    response = await client.post("/api/commands/get-submission", headers=bearer(token), json={"id": submission_id})
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    return reply


async def test_get_submission_shows_no_one_elses_logs_or_code_before_the_deadline(
    client: httpx.AsyncClient, tokens: Tokens, alice_submission: int
) -> None:
    reply = await _get_submission(client, tokens.bob, alice_submission)
    text = json.dumps(reply)
    assert MARKER.decode().strip() not in text and "printed by the kernel" not in text
    assert not [b for b in reply["blocks"] if b["type"] == "file"]
    assert reply["ephemeral"] is True


async def test_get_submission_shows_the_author_her_logs_and_code(
    client: httpx.AsyncClient, tokens: Tokens, alice_submission: int
) -> None:
    reply = await _get_submission(client, tokens.alice, alice_submission)
    files = [b for b in reply["blocks"] if b["type"] == "file"]
    assert any(f["name"].endswith("-stdout.txt") for f in files), [f["name"] for f in files]
    assert any(f["description"].startswith("code of #") for f in files), files
    assert reply["ephemeral"] is True


async def test_get_submission_keeps_code_private_after_the_deadline_where_the_leaderboard_says_so(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens, clock: Clock, alice_submission: int
) -> None:
    _keep_code_private_and_pass_the_deadline(kc, clock)
    text = json.dumps(await _get_submission(client, tokens.bob, alice_submission))
    assert MARKER.decode().strip() not in text and "printed by the kernel" not in text


async def test_a_failed_verdict_shows_others_no_exception_text(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    response = await submit(client, tokens.alice, solution() + b"# WRONG\n", mode="test")
    submission_id: int = response.json()["submission_id"]
    await finish(kc, submission_id)
    seen = json.dumps(await _get_submission(client, tokens.bob, submission_id))
    assert "a test failed" not in seen and "mismatch at index 3" not in seen
    own = json.dumps(await _get_submission(client, tokens.alice, submission_id))
    assert "a test failed" in own


async def test_a_jobs_error_text_reaches_only_its_author(
    client: httpx.AsyncClient, kc: Kernelcup, runner: ScriptedRunner, tokens: Tokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job with no result carries the runner's words, which can quote the harness's output
    (the local runner's 'last lines of its stderr'): the API, the page, the live stream and the
    chat command tell others its status only. The real harness's verdicts:
    tests/web/test_verdict_privacy.py."""
    secret = MARKER.decode().strip()

    async def dies(spec: JobSpec, context: RunContext, on_progress: ProgressCallback) -> Result:
        await on_progress(Progress("compiling"))
        raise RunnerError(f"the harness exited with code 1 without a result; last lines of its stderr:\n{secret}")

    monkeypatch.setattr(runner, "run", dies)
    submission_id = (await submit(client, tokens.alice, solution())).json()["submission_id"]
    others = {"anyone": {}, "bob": bearer(tokens.bob)}
    streams = {who: (await client.get(f"/api/submissions/{submission_id}/events", headers=h)).text
               for who, h in others.items()}
    for who, headers in others.items():
        assert '"state": "errored"' in streams[who] and secret not in streams[who], who
        for path in (f"/api/submissions/{submission_id}", f"/submissions/{submission_id}"):
            response = await client.get(path, headers=headers)
            assert response.status_code == 200 and secret not in response.text, (who, path)
        seen = (await client.get(f"/api/submissions/{submission_id}", headers=headers)).json()
        assert seen["jobs"][0]["error"] is None and seen["jobs"][0]["state"] == "errored"
    assert secret not in json.dumps(await _get_submission(client, tokens.bob, submission_id))
    own = (await client.get(f"/api/submissions/{submission_id}", headers=bearer(tokens.alice))).json()
    assert secret in own["jobs"][0]["error"]
    assert secret in json.dumps(await _get_submission(client, tokens.alice, submission_id))
