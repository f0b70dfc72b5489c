"""A private leaderboard over HTTP: to a non-member every read of it (the list, the leaderboard,
its rankings and history, its submissions, a member's page, the HTML pages) answers as for a
leaderboard or submission that does not exist, and submitting to it is refused as to a missing
one; a member who joined with the invite code (``POST /api/commands/join``) reads and submits."""

from __future__ import annotations

import difflib
import re

import httpx

from kernelcup.adapters.web.auth import COOKIE
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Request
from tests.web.conftest import ADMIN, Tokens, bearer, finish, solution, submit
from tests.web.test_signin import sign_in

BOARD, MISSING = "identity", "no-such-cup"


async def _private_with_code(kc: Kernelcup) -> str:
    reply = await kc.handle(Request(ADMIN, "private", {"leaderboard": BOARD, "code": True}))
    found = re.search(r"Invite code: (\S+)", reply.text())
    assert reply.ok and found, reply.text()
    return found.group(1)


async def _member_submission(client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens, code: str) -> int:
    joined = await client.post("/api/commands/join", headers=bearer(tokens.alice),
                               json={"leaderboard": BOARD, "code": code})
    assert joined.status_code == 200, joined.text
    response = await submit(client, tokens.alice, solution() + b"\n# score: 0.001\n", mode="ranked", board=BOARD)
    assert response.status_code == 202, response.text
    submission_id: int = response.json()["submission_id"]
    await finish(kc, submission_id)
    return submission_id


async def _reads(client: httpx.AsyncClient, headers: dict[str, str], board: str, submission_id: int,
                 ) -> dict[str, tuple[int, str]]:
    paths = [f"/api/leaderboards/{board}", f"/api/leaderboards/{board}/rankings",
             f"/api/leaderboards/{board}/history?gpu=cpu", f"/api/submissions/{submission_id}",
             f"/api/submissions/{submission_id}/report", f"/leaderboards/{board}", f"/submissions/{submission_id}"]
    out = {}
    for path in paths:
        response = await client.get(path, headers=headers)
        text = response.text.replace(board, "NAME")
        for mark in ("#", "/", "submission "):  # the id, not every digit alike
            text = text.replace(f"{mark}{submission_id}", f"{mark}ID")
        out[path.replace(board, "NAME").replace(str(submission_id), "ID")] = (response.status_code, text)
    return out


def _differences(left: dict[str, tuple[int, str]], right: dict[str, tuple[int, str]]) -> str:
    return "\n".join(f"{path}: " + "".join(difflib.unified_diff(
        left[path][1].splitlines(True), right[path][1].splitlines(True), n=1))[:2000]
        for path in left if left[path] != right[path])


async def test_a_non_member_reads_nothing_of_a_private_board_and_cannot_submit(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    code = await _private_with_code(kc)
    entry = await _member_submission(client, kc, tokens, code)
    page_session = {"Cookie": f"{COOKIE}={await sign_in(client, tokens.bob)}"}
    client.cookies.clear()
    for headers in (bearer(tokens.bob), {}, page_session):
        private = await _reads(client, headers, BOARD, entry)
        missing = await _reads(client, headers, MISSING, entry + 1000)
        assert private == missing, _differences(private, missing)
        assert all(status == 404 for status, _ in private.values()), private
        assert BOARD not in {b["name"] for b in (await client.get("/api/leaderboards", headers=headers)).json()}
        listed = (await client.get("/api/submissions", headers=headers)).json()
        assert entry not in {s["id"] for s in listed}
        assert BOARD not in (await client.get("/", headers=headers)).text
    refused = await submit(client, tokens.bob, solution(), board=BOARD)
    nowhere = await submit(client, tokens.bob, solution(), board=MISSING)
    assert refused.status_code == nowhere.status_code == 404
    assert refused.text.replace(BOARD, "NAME") == nowhere.text.replace(MISSING, "NAME")


async def test_a_wrong_code_over_http_answers_as_a_missing_board(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    await _private_with_code(kc)
    wrong = await client.post("/api/commands/join", headers=bearer(tokens.bob),
                              json={"leaderboard": BOARD, "code": "guess"})
    nowhere = await client.post("/api/commands/join", headers=bearer(tokens.bob),
                                json={"leaderboard": MISSING, "code": "guess"})
    assert wrong.status_code == nowhere.status_code == 404
    assert wrong.text.replace(BOARD, "NAME") == nowhere.text.replace(MISSING, "NAME")


async def test_a_member_with_the_code_reads_the_board_over_http(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    code = await _private_with_code(kc)
    entry = await _member_submission(client, kc, tokens, code)
    reads = await _reads(client, bearer(tokens.alice), BOARD, entry)
    assert all(status == 200 for status, _ in reads.values()), reads
    rankings = (await client.get(f"/api/leaderboards/{BOARD}/rankings", headers=bearer(tokens.alice))).json()
    assert [e["user_name"] for r in rankings for e in r["entries"]] == ["alice"]
