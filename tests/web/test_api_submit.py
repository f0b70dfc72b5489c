"""Submitting over HTTP: the id at once, following by events or polling, and every refusal as
the status a client expects. The rules themselves are the core's."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx

from kernelcup.core.app import Kernelcup
from tests.web.conftest import ScriptedRunner, Tokens, bearer, finish, solution, submit


def events_of(stream: str) -> list[tuple[str, dict[str, object]]]:
    """The events of a stream; its keep-alive comments (``: ping`` after 15 s idle) left out."""
    out = []
    for chunk in stream.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines() if not line.startswith(":"))
        if lines:
            out.append((lines["event"], json.loads(lines["data"])))
    return out


async def test_submit_answers_with_the_id_while_the_job_still_runs(
    client: httpx.AsyncClient, kc: Kernelcup, runner: ScriptedRunner, tokens: Tokens
) -> None:
    runner.gate = threading.Event()
    response = await submit(client, tokens.alice, solution())
    assert response.status_code == 202
    submission_id = response.json()["submission_id"]
    assert response.json()["events_url"] == f"/api/submissions/{submission_id}/events"
    await asyncio.to_thread(runner.waiting.wait, 10)
    running = (await client.get(f"/api/submissions/{submission_id}")).json()
    assert running["finished"] is False and running["jobs"][0]["phase"] == "testing"
    runner.gate.set()
    await finish(kc, submission_id)
    done = (await client.get(f"/api/submissions/{submission_id}")).json()
    assert done["finished"] is True and done["passed"] is True
    assert done["jobs"][0]["verdict"] == "all tests passed" and len(done["jobs"][0]["tests"]) == 5


async def test_events_stream_each_phase_then_done(client: httpx.AsyncClient, tokens: Tokens) -> None:
    submission_id = (await submit(client, tokens.alice, solution())).json()["submission_id"]
    response = await client.get(f"/api/submissions/{submission_id}/events")
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response.text)
    phases = [data["phase"] for name, data in events if name == "progress"]
    assert phases[0] in ("queued", "compiling", "testing", "done")
    assert phases[-1] == "done"
    assert events[-1] == ("done", {"submission_id": submission_id, "finished": True, "passed": True,
                                   "url": f"/submissions/{submission_id}"})


async def test_a_failing_submission_reads_as_failed(client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens) -> None:
    """Its author reads each case's message; anyone else which case failed, not the message
    (SECURITY.md, What a submission shows whom)."""
    submission_id = (await submit(client, tokens.alice, solution() + b"\n# WRONG\n")).json()["submission_id"]
    await finish(kc, submission_id)
    own = (await client.get(f"/api/submissions/{submission_id}", headers=bearer(tokens.alice))).json()
    assert own["passed"] is False
    assert own["jobs"][0]["verdict"] == "a test failed"
    assert own["jobs"][0]["tests"][0]["message"] == "mismatch at index 3"
    seen = (await client.get(f"/api/submissions/{submission_id}")).json()
    assert seen["passed"] is False
    assert seen["jobs"][0]["verdict"] == "failed: test 1 of 5"
    assert [case["message"] for case in seen["jobs"][0]["tests"]] == [""] * 5
    assert "mismatch at index 3" not in json.dumps(seen)


async def test_submitting_needs_a_token(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/submissions", data={"mode": "test"}, files={"file": ("k.py", solution())})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "token" in response.json()["hint"]


async def test_a_wrong_or_malformed_token_is_401(client: httpx.AsyncClient) -> None:
    for header in ("Bearer kc_not-a-real-token", "Basic dXNlcjpwYXNz", "Bearer"):
        response = await client.get("/api/me", headers={"Authorization": header})
        assert response.status_code == 401, header
        assert response.json()["kind"] == "unauthenticated"


async def test_a_file_over_the_size_limit_is_413(client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens) -> None:
    big = b"# padding\n" * (kc.settings.limits.max_file_bytes // 10 + 1)
    response = await submit(client, tokens.alice, big)
    assert response.status_code == 413
    assert "the limit is 1024 KiB" in response.json()["detail"]


async def test_a_body_over_the_request_limit_is_cut_off_with_413(client: httpx.AsyncClient, kc: Kernelcup,
                                                                 tokens: Tokens) -> None:
    huge = b"x" * (17 * 1024 * 1024)
    response = await submit(client, tokens.alice, huge)
    assert response.status_code == 413


async def test_a_file_that_is_not_text_is_422(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await submit(client, tokens.alice, b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    assert response.status_code == 422
    assert "is not UTF-8 text" in response.json()["detail"]


async def test_a_missing_mode_is_422_naming_the_field(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await client.post("/api/submissions", headers=bearer(tokens.alice), files={"file": ("k.py", solution())})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "mode"]


async def test_the_rate_limit_answers_429_with_retry_after(client: httpx.AsyncClient, tokens: Tokens) -> None:
    limit = await client.post("/api/commands/rate-limit", headers=bearer(tokens.admin),
                              json={"leaderboard": "identity", "mode": "test", "per_hour": 1})
    assert limit.status_code == 200, limit.text
    assert (await submit(client, tokens.alice, solution())).status_code == 202
    refused = await submit(client, tokens.alice, solution())
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "3600"  # the first one leaves the hour's window then
    assert refused.json()["kind"] == "rate_limited"
    assert refused.json()["detail"] == "Rate limit reached: 1 test submissions per hour on this leaderboard."


async def test_the_shipped_default_rate_limit_stops_a_flood_of_submissions(client: httpx.AsyncClient,
                                                                          tokens: Tokens) -> None:
    """No admin set any limit: config/kernelcup.yml's limits.submissions_per_hour holds."""
    for _ in range(30):
        assert (await submit(client, tokens.alice, solution())).status_code == 202
    refused = await submit(client, tokens.alice, solution(), mode="benchmark")
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
    assert refused.json()["detail"] == "Rate limit reached: 30 submissions per hour on all leaderboards."
    assert (await submit(client, tokens.bob, solution())).status_code == 202  # one user's limit only


async def test_paused_submissions_are_409(client: httpx.AsyncClient, tokens: Tokens) -> None:
    assert (await client.post("/api/commands/pause", headers=bearer(tokens.admin))).status_code == 200
    response = await submit(client, tokens.alice, solution())
    assert response.status_code == 409
    assert response.json()["detail"] == "Submissions are paused right now."


async def test_a_banned_user_is_403(client: httpx.AsyncClient, tokens: Tokens) -> None:
    ban = await client.post("/api/commands/ban", headers=bearer(tokens.admin), json={"user": "web:alice"})
    assert ban.status_code == 200, ban.text
    response = await submit(client, tokens.alice, solution())
    assert response.status_code == 403 and response.json()["detail"] == "You are banned from submitting."


async def test_several_gpus_and_none_named_is_422_with_the_choices(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await submit(client, tokens.alice, solution(), gpus=())
    assert response.status_code == 422
    assert response.json()["kind"] == "needs_choice"
    assert response.json()["choices"] == {"gpu": ["H100", "cpu"]}


async def test_an_unknown_leaderboard_is_404(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await submit(client, tokens.alice, solution(), board="nosuch")
    assert response.status_code == 404
    assert response.json()["detail"] == "There is no leaderboard 'nosuch'."


async def test_only_the_author_cancels(client: httpx.AsyncClient, kc: Kernelcup, runner: ScriptedRunner,
                                       tokens: Tokens) -> None:
    runner.gate = threading.Event()
    submission_id = (await submit(client, tokens.alice, solution())).json()["submission_id"]
    refused = await client.post(f"/api/submissions/{submission_id}/cancel", headers=bearer(tokens.bob))
    assert refused.status_code == 403
    cancelled = await client.post(f"/api/submissions/{submission_id}/cancel", headers=bearer(tokens.alice))
    assert cancelled.status_code == 200 and cancelled.json()["ok"] is True
    runner.gate.set()
    await finish(kc, submission_id)
