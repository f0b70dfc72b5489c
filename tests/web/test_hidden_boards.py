"""A hidden leaderboard is no existence oracle (issue #37): every surface answers a viewer who may
not see it exactly as it answers for a leaderboard that does not exist.

The answers are read twice with the same names and ids: while the hidden leaderboard (with a
submission of its creator's) exists, and after an admin deleted it. Each must be the same, byte
for byte: the API, the pages, the command routes, and the core's commands as the chat adapters
call them (Discord, Slack identities), autocomplete included.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest
from sqlalchemy.engine import Engine

from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.registry import Kind
from kernelcup.core.messages import Actor, Attachment, Reply, Request
from tests.web.conftest import ADMIN, BOB, ROOT, Clock, ScriptedRunner, Tokens, bearer, build_app, finish, make_settings
from tests.web.conftest import solution as identity_solution

SECRET = "secret-cup"
SLACK_USER = Actor("slack:T1/U9", "sam")


@pytest.fixture
async def kc(db_engine: Engine, runner: ScriptedRunner, clock: Clock) -> AsyncIterator[Kernelcup]:
    """Bob (discord:42) is a creator, but not the hidden leaderboard's: only admins and its creator see it."""
    settings = replace(make_settings(), roles={"admin": [ADMIN.identity], "creator": [BOB.identity]})
    app = build_app(db_engine, runner, clock, settings)
    await app.pipeline.start()
    yield app
    await app.pipeline.stop()


def _identity_zip() -> bytes:
    buffer = io.BytesIO()
    folder = ROOT / "leaderboards" / "identity"
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in folder.iterdir():
            if path.is_file():
                bundle.write(path, f"board/{path.name}")
        bundle.write(ROOT / "leaderboards" / "utils.py", "board/utils.py")
    return buffer.getvalue()


async def _hidden_board_with_a_submission(kc: Kernelcup) -> int:
    created = await kc.handle(Request(ADMIN, "create", {"folder": "board.zip", "name": SECRET, "gpu": ["cpu"],
                                                        "deadline": "+7d", "hidden": True},
                                      [Attachment("board.zip", _identity_zip())]))
    assert created.ok, created.text()
    submitted = await kc.handle(Request(ADMIN, "submit", {"mode": "ranked", "leaderboard": SECRET, "gpu": ["cpu"]},
                                        [Attachment("k.py", identity_solution())]))
    assert submitted.submission_id is not None, submitted.text()
    await finish(kc, submitted.submission_id)
    return submitted.submission_id


def _reply(reply: Reply) -> tuple[object, ...]:
    return reply.ok, reply.text(), reply.problem, reply.choices


async def _chat_answers(kc: Kernelcup, submission_id: int) -> dict[str, object]:
    """The core's commands, as Discord and Slack hand them over."""
    out: dict[str, object] = {}
    for actor in (BOB, SLACK_USER):
        asks: dict[str, dict[str, object]] = {
            "show": {"leaderboard": SECRET},
            "task": {"leaderboard": SECRET},
            "template": {"leaderboard": SECRET},
            "mine": {"leaderboard": SECRET},
            "delete": {"leaderboard": SECRET, "yes": True},
            "get-submission": {"id": submission_id},
            "cancel": {"id": submission_id},
            "list": {},
        }
        for command, args in asks.items():
            out[f"{actor.identity} {command}"] = _reply(await kc.handle(Request(actor, command, dict(args))))
        submit = Request(actor, "submit", {"mode": "test", "leaderboard": SECRET},
                         [Attachment("k.py", identity_solution())])
        out[f"{actor.identity} submit"] = _reply(await kc.handle(submit))
    out["autocomplete gpu"] = await kc.complete(Kind.GPU, "", {"leaderboard": SECRET})
    out["autocomplete leaderboard"] = await kc.complete(Kind.LEADERBOARD, "sec")
    return out


async def _web_answers(client: httpx.AsyncClient, tokens: Tokens, submission_id: int) -> dict[str, object]:
    out: dict[str, object] = {}
    reads = [f"/api/leaderboards/{SECRET}", f"/api/leaderboards/{SECRET}/rankings",
             f"/api/leaderboards/{SECRET}/rankings?gpu=cpu", f"/api/leaderboards/{SECRET}/history?gpu=cpu",
             f"/api/submissions?leaderboard={SECRET}", "/api/leaderboards", f"/api/submissions/{submission_id}",
             f"/api/submissions/{submission_id}/report", f"/api/submissions/{submission_id}/events",
             f"/leaderboards/{SECRET}", f"/leaderboards/{SECRET}?gpu=cpu", f"/submissions/{submission_id}", "/"]
    for who, headers in (("anonymous", {}), ("bob", bearer(tokens.bob)), ("alice", bearer(tokens.alice))):
        for path in reads:
            response = await client.get(path, headers=headers)
            out[f"{who} GET {path}"] = (response.status_code, response.text)
    for who, token in (("bob", tokens.bob), ("alice", tokens.alice)):
        writes: dict[str, dict[str, object]] = {
            f"/api/commands/{command}": {"leaderboard": SECRET} for command in ("show", "task", "template", "mine")
        }
        writes["/api/commands/delete"] = {"leaderboard": SECRET, "yes": True}
        writes["/api/commands/get-submission"] = {"id": submission_id}
        writes["/api/commands/cancel"] = {"id": submission_id}
        for path, body in writes.items():
            response = await client.post(path, headers=bearer(token), json=body)
            out[f"{who} POST {path}"] = (response.status_code, response.text)
        response = await client.post(f"/api/submissions/{submission_id}/cancel", headers=bearer(token))
        out[f"{who} POST cancel"] = (response.status_code, response.text)
        response = await client.post("/api/submissions", headers=bearer(token),
                                     data={"mode": "test", "leaderboard": SECRET, "gpu": ["cpu"]},
                                     files={"file": ("k.py", identity_solution(), "text/x-python")})
        out[f"{who} POST /api/submissions"] = (response.status_code, response.text)
    return out


async def test_a_hidden_leaderboard_answers_as_a_missing_one_on_every_surface(
    kc: Kernelcup, client: httpx.AsyncClient, tokens: Tokens
) -> None:
    submission_id = await _hidden_board_with_a_submission(kc)
    seen_by_admin = await client.get(f"/api/leaderboards/{SECRET}", headers=bearer(tokens.admin))
    assert seen_by_admin.status_code == 200  # it is there, for those who may see it

    hidden = {**await _chat_answers(kc, submission_id), **await _web_answers(client, tokens, submission_id)}
    deleted = await kc.handle(Request(ADMIN, "delete", {"leaderboard": SECRET, "yes": True}))
    assert deleted.ok, deleted.text()
    missing = {**await _chat_answers(kc, submission_id), **await _web_answers(client, tokens, submission_id)}

    differing = {key: (hidden[key], missing[key]) for key in hidden if hidden[key] != missing[key]}
    assert not differing, "\n\n".join(f"{key}:\n  hidden:  {a!r}\n  missing: {b!r}" for key, (a, b) in
                                      differing.items())
