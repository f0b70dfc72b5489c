"""``/leaderboard token``: a personal API token from any platform, shown once, stored hashed."""

from __future__ import annotations

import hashlib

import httpx
from sqlmodel import select

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Code, Reply, Request
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import ApiToken
from tests.web.conftest import ADMIN, ALICE, BOB, bearer


def token_in(reply: Reply) -> str:
    return next(block.code for block in reply.blocks if isinstance(block, Code))


async def test_a_token_is_shown_once_ephemerally_and_stored_as_its_sha256(kc: Kernelcup) -> None:
    reply = await kc.handle(Request(actor=BOB, command="token"))
    assert reply.ok and reply.ephemeral
    token = token_in(reply)
    assert token.startswith("kc_") and len(token) > 40
    with session_scope(kc.engine) as session:
        stored = session.exec(select(ApiToken.token_sha256)).all()
    assert stored == [hashlib.sha256(token.encode()).hexdigest()]


async def test_the_token_acts_as_its_owner_on_the_api(kc: Kernelcup, client: httpx.AsyncClient) -> None:
    token = token_in(await kc.handle(Request(actor=BOB, command="token")))
    me = (await client.get("/api/me", headers=bearer(token))).json()
    assert me["identity"] == BOB.identity


async def test_revoking_makes_every_token_of_the_user_unknown(kc: Kernelcup, client: httpx.AsyncClient) -> None:
    """Bob's tokens from chat, from the API and from an admin all stop working; Alice's does not."""
    from_chat = token_in(await kc.handle(Request(actor=BOB, command="token")))
    over_api = (await client.post("/api/commands/token", headers=bearer(from_chat))).json()
    from_api = next(b["code"] for b in over_api["blocks"] if b["type"] == "code")
    from_admin = token_in(await kc.handle(Request(actor=ADMIN, command="token", args={"user": BOB.identity})))
    alices = token_in(await kc.handle(Request(actor=ALICE, command="token")))
    bobs = [from_chat, from_api, from_admin]
    assert len(set(bobs)) == 3
    for token in [*bobs, alices]:
        assert (await client.get("/api/me", headers=bearer(token))).status_code == 200

    revoked = await kc.handle(Request(actor=BOB, command="token", args={"revoke": True}))
    assert revoked.ok
    assert [(await client.get("/api/me", headers=bearer(token))).status_code for token in bobs] == [401, 401, 401]
    assert "Revoked 3 token(s)" in revoked.text(), revoked.text()
    assert (await client.get("/api/me", headers=bearer(alices))).json()["identity"] == ALICE.identity


async def test_a_user_cannot_take_a_token_for_someone_else(kc: Kernelcup) -> None:
    reply = await kc.handle(Request(actor=BOB, command="token", args={"user": ALICE.identity}))
    assert not reply.ok and reply.problem is not None and reply.problem.kind == "forbidden"


async def test_an_admin_issues_a_token_for_a_new_identity(kc: Kernelcup, client: httpx.AsyncClient) -> None:
    reply = await kc.handle(Request(actor=ADMIN, command="token", args={"user": "ci:nightly"}))
    assert reply.ok, reply.text()
    me = (await client.get("/api/me", headers=bearer(token_in(reply)))).json()
    assert (me["identity"], me["name"], me["role"]) == ("ci:nightly", "nightly", "user")


async def test_the_token_command_works_over_the_api_too(client: httpx.AsyncClient, kc: Kernelcup) -> None:
    first = token_in(await kc.handle(Request(actor=BOB, command="token")))
    reply = (await client.post("/api/commands/token", headers=bearer(first))).json()
    second = next(b["code"] for b in reply["blocks"] if b["type"] == "code")
    assert second != first and (await client.get("/api/me", headers=bearer(second))).status_code == 200
