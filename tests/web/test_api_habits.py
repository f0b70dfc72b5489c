"""The REST API's side of issue 39: popcorn's ``leaderboard`` mode, the job's state beside the
verdict, and the documented error shape for a missing query parameter."""

from __future__ import annotations

import httpx

from kernelcup.core.app import Kernelcup
from tests.web.conftest import Tokens, bearer, finish, solution, submit
from tests.web.test_api_submit import events_of


async def test_the_history_without_a_gpu_answers_the_documented_error_shape(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/leaderboards/identity/history")
    assert response.status_code == 422
    assert response.json() == {"detail": "The query parameter gpu is missing.",
                               "hint": "The route's parameters are in /docs.", "kind": "invalid", "choices": None}


async def test_leaderboard_is_ranked_on_the_submit_route(client: httpx.AsyncClient, kc: Kernelcup,
                                                         tokens: Tokens) -> None:
    response = await submit(client, tokens.alice, solution(), mode="leaderboard")
    assert response.status_code == 202, response.text
    submission_id = response.json()["submission_id"]
    await finish(kc, submission_id)
    assert (await client.get(f"/api/submissions/{submission_id}")).json()["mode"] == "ranked"


async def test_leaderboard_is_ranked_on_the_command_route(client: httpx.AsyncClient, tokens: Tokens) -> None:
    body = {"mode": "leaderboard", "leaderboard": "identity", "gpu": ["cpu"],
            "attachments": [{"name": "kernel.py", "text": solution().decode()}]}
    response = await client.post("/api/commands/submit", json=body, headers=bearer(tokens.alice))
    assert response.status_code == 200, response.text
    assert "(ranked)" in response.json()["text"]


async def test_a_failed_verdict_sits_beside_a_completed_job_never_a_succeeded_one(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    submission_id = (await submit(client, tokens.alice, solution() + b"\n# WRONG\n")).json()["submission_id"]
    await finish(kc, submission_id)
    job = (await client.get(f"/api/submissions/{submission_id}", headers=bearer(tokens.alice))).json()["jobs"][0]
    assert (job["state"], job["passed"]) == ("completed", False) and "status" not in job
    stream = (await client.get(f"/api/submissions/{submission_id}/events")).text
    last = [data for name, data in events_of(stream) if name == "progress"][-1]
    assert last["state"] == "completed" and "status" not in last
