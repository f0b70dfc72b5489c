"""``POST /api/commands/token`` naming another user (SECURITY.md, *The bot's own surfaces*): a
user's API token cannot take a token for someone else. The answer is 403 with no token in it,
and no token is stored for the other user; an admin's same request issues one (the control).
The core's side: ``tests/web/test_tokens.py``."""

from __future__ import annotations

import httpx
from sqlmodel import col, func, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import ApiToken
from tests.web.conftest import ALICE, Tokens, bearer


def _token_count(kc: Kernelcup) -> int:
    with session_scope(kc.engine) as session:
        return int(session.exec(select(func.count(col(ApiToken.id)))).one())


async def test_the_api_refuses_a_user_a_token_for_someone_else(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    before = _token_count(kc)
    refused = await client.post("/api/commands/token", headers=bearer(tokens.bob), json={"user": ALICE.identity})
    assert refused.status_code == 403, refused.text
    assert not [block for block in refused.json()["blocks"] if block["type"] == "code"], refused.text
    assert _token_count(kc) == before

    issued = await client.post("/api/commands/token", headers=bearer(tokens.admin), json={"user": ALICE.identity})
    assert issued.status_code == 200, issued.text
    alices = next(block["code"] for block in issued.json()["blocks"] if block["type"] == "code")
    assert (await client.get("/api/me", headers=bearer(alices))).json()["identity"] == ALICE.identity
