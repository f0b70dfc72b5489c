"""Withdrawing over HTTP (``POST /api/commands/withdraw``): the run leaves the rankings, the history
and the lists, and for anyone but its author and admins the submission answers 404."""

from __future__ import annotations

import httpx

from kernelcup.core.app import Kernelcup
from tests.web.conftest import Tokens, bearer, finish, solution, submit


async def _ranked(client: httpx.AsyncClient, kc: Kernelcup, token: str, score: float) -> int:
    code = solution() + f"\n# score: {score}\n".encode()
    response = await submit(client, token, code, mode="ranked")
    assert response.status_code == 202, response.text
    submission_id: int = response.json()["submission_id"]
    await finish(kc, submission_id)
    return submission_id


async def test_a_withdrawn_run_leaves_rankings_history_and_lists_and_others_get_404(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    withdrawn = await _ranked(client, kc, tokens.bob, 0.001)
    await _ranked(client, kc, tokens.alice, 0.002)
    reply = await client.post("/api/commands/withdraw", headers=bearer(tokens.bob), json={"id": withdrawn})
    assert reply.status_code == 200, reply.text
    rankings = {r["gpu"]: r["entries"] for r in (await client.get("/api/leaderboards/identity/rankings")).json()}
    assert [e["user_name"] for e in rankings["cpu"]] == ["alice"]
    history = (await client.get("/api/leaderboards/identity/history?gpu=cpu")).json()
    assert withdrawn not in {point["submission_id"] for point in history}
    assert (await client.get(f"/api/submissions/{withdrawn}", headers=bearer(tokens.alice))).status_code == 404
    assert (await client.get(f"/api/submissions/{withdrawn}")).status_code == 404
    listed = (await client.get("/api/submissions", headers=bearer(tokens.alice))).json()
    assert withdrawn not in {s["id"] for s in listed}
    own = (await client.get(f"/api/submissions/{withdrawn}", headers=bearer(tokens.bob))).json()
    assert own["outcome"].startswith("withdrawn; ")
    assert (await client.get(f"/api/submissions/{withdrawn}", headers=bearer(tokens.admin))).status_code == 200


async def test_over_http_another_user_cannot_withdraw_and_an_admin_needs_a_reason(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    theirs = await _ranked(client, kc, tokens.bob, 0.001)
    refused = await client.post("/api/commands/withdraw", headers=bearer(tokens.alice), json={"id": theirs})
    assert refused.status_code == 403, refused.text
    bare = await client.post("/api/commands/withdraw", headers=bearer(tokens.admin), json={"id": theirs})
    assert bare.status_code == 422, bare.text
    done = await client.post("/api/commands/withdraw", headers=bearer(tokens.admin),
                             json={"id": theirs, "reason": "shared account"})
    assert done.status_code == 200, done.text
