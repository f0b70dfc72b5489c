"""A hidden leaderboard on the pages (SECURITY.md, *The bot's own surfaces*): the rendered HTML
a browser gets. Anyone and a signed-in user get the leaderboard's page as a missing one's (404,
the same page but for the name) and find no link to it on the front page; a signed-in admin
reads both. The API's side is ``tests/web/test_api_reads.py``."""

from __future__ import annotations

import httpx

from kernelcup.adapters.web.auth import COOKIE
from kernelcup.core.app import Kernelcup
from tests.web.conftest import Tokens
from tests.web.test_api_reads import hide
from tests.web.test_signin import sign_in

LINK = 'href="/leaderboards/matmul"'


async def _cookies(client: httpx.AsyncClient, tokens: Tokens) -> dict[str, dict[str, str]]:
    sessions: dict[str, dict[str, str]] = {"anyone": {}}
    for who, token in (("bob", tokens.bob), ("admin", tokens.admin)):
        sessions[who] = {"Cookie": f"{COOKIE}={await sign_in(client, token)}"}
        client.cookies.clear()  # each request below carries the session it names, or none
    return sessions


async def test_a_hidden_leaderboards_page_is_missing_for_users_and_shown_to_admins(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    sessions = await _cookies(client, tokens)
    front = (await client.get("/")).text
    assert LINK in front  # the premise: a public leaderboard is linked from the front page
    missing = await client.get("/leaderboards/no-such-board")
    hide(kc, "matmul")

    for who in ("anyone", "bob"):
        page = await client.get("/leaderboards/matmul", headers=sessions[who])
        assert page.status_code == 404 == missing.status_code, (who, page.text)
        assert page.text.replace("matmul", "no-such-board") == missing.text, (who, page.text)
        assert LINK not in (await client.get("/", headers=sessions[who])).text, who

    shown = await client.get("/leaderboards/matmul", headers=sessions["admin"])
    assert shown.status_code == 200 and "<h1" in shown.text and "matmul" in shown.text, shown.text
    assert LINK in (await client.get("/", headers=sessions["admin"])).text
