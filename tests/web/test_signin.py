"""Signing in and out on the pages, through the real routes: the cookie holds a session id, never
the token; both forms carry a CSRF value and refuse another site; signing out (or revoking the
token) ends the session wherever the cookie was copied."""

from __future__ import annotations

import re

import httpx
from sqlalchemy import text

from kernelcup.adapters.web.app import create_app
from kernelcup.adapters.web.auth import COOKIE
from kernelcup.adapters.web.csrf import FORM_COOKIE
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Request
from tests.web.conftest import BOB, Tokens

FORM_VALUE = re.compile(r'name="csrf" value="([^"]*)"')


def form_value(page: str) -> str:
    match = FORM_VALUE.search(page)
    assert match is not None, page
    return match.group(1)


async def sign_in(client: httpx.AsyncClient, token: str) -> str:
    """The way a browser does it: the sign-in page, then its form. The session id it got."""
    page = await client.get("/signin")
    response = await client.post("/signin", data={"token": token, "csrf": form_value(page.text)})
    assert response.status_code == 303, response.text
    session_id = response.cookies.get(COOKIE)
    assert session_id is not None
    return session_id


def browser(kc: Kernelcup, session_id: str) -> httpx.AsyncClient:
    """Another browser holding a copy of the cookie."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(kc)), base_url="http://kernelcup.test",
                             cookies={COOKIE: session_id})


async def me(kc: Kernelcup, session_id: str) -> int:
    async with browser(kc, session_id) as copy:
        return (await copy.get("/api/me")).status_code


async def test_the_sign_in_cookie_holds_a_session_id_never_the_token(client: httpx.AsyncClient, kc: Kernelcup,
                                                                     tokens: Tokens) -> None:
    page = await client.get("/signin")
    response = await client.post("/signin", data={"token": tokens.bob, "csrf": form_value(page.text)})
    assert response.status_code == 303
    cookies = response.headers.get_list("set-cookie")
    assert tokens.bob not in "".join(cookies)
    session_cookie = next(c for c in cookies if c.startswith(f"{COOKIE}="))
    assert "HttpOnly" in session_cookie and "SameSite=strict" in session_cookie
    session_id = response.cookies[COOKIE]
    assert session_id.startswith("kcs_") and session_id != tokens.bob
    with kc.engine.connect() as connection:
        stored = connection.execute(text("SELECT session_sha256 FROM websession")).scalars().all()
    assert len(stored) == 1 and session_id not in stored[0]  # only its sha256 is kept
    assert await me(kc, session_id) == 200


async def test_a_raw_token_in_the_cookie_signs_nobody_in(kc: Kernelcup, tokens: Tokens) -> None:
    assert await me(kc, tokens.bob) == 401


async def test_a_sign_in_form_without_its_csrf_value_is_refused(client: httpx.AsyncClient, tokens: Tokens) -> None:
    no_value = await client.post("/signin", data={"token": tokens.bob})
    assert no_value.status_code == 403 and COOKIE not in no_value.cookies
    assert "did not come from this site" in no_value.text
    await client.get("/signin")  # the form cookie is set...
    wrong = await client.post("/signin", data={"token": tokens.bob, "csrf": "guessed"})  # ...the value guessed
    assert wrong.status_code == 403 and COOKIE not in wrong.cookies


async def test_a_sign_in_form_posted_from_another_site_is_refused(client: httpx.AsyncClient, tokens: Tokens) -> None:
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}, {"Origin": "null"}):
        page = await client.get("/signin")
        response = await client.post("/signin", data={"token": tokens.bob, "csrf": form_value(page.text)},
                                     headers=headers)
        assert response.status_code == 403, headers
        assert COOKIE not in response.cookies
    page = await client.get("/signin")
    same = await client.post("/signin", data={"token": tokens.bob, "csrf": form_value(page.text)},
                             headers={"Origin": "http://kernelcup.test", "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 303


async def test_the_sign_in_csrf_value_is_used_once(client: httpx.AsyncClient, tokens: Tokens) -> None:
    page = await client.get("/signin")
    value = form_value(page.text)
    assert (await client.post("/signin", data={"token": tokens.bob, "csrf": value})).status_code == 303
    assert FORM_COOKIE not in client.cookies  # spent with the sign-in
    replayed = await client.post("/signin", data={"token": tokens.alice, "csrf": value})
    assert replayed.status_code == 403


async def test_signing_out_ends_the_session_even_for_a_copied_cookie(client: httpx.AsyncClient, kc: Kernelcup,
                                                                     tokens: Tokens) -> None:
    session_id = await sign_in(client, tokens.bob)
    home = await client.get("/")
    assert "Sign out" in home.text
    response = await client.post("/signout", data={"csrf": form_value(home.text)})
    assert response.status_code == 303
    assert await me(kc, session_id) == 401  # the copied cookie no longer works


async def test_a_forged_sign_out_is_refused_and_the_session_lives(client: httpx.AsyncClient, kc: Kernelcup,
                                                                   tokens: Tokens) -> None:
    session_id = await sign_in(client, tokens.bob)
    assert (await client.post("/signout")).status_code == 403
    assert (await client.post("/signout", data={"csrf": "x"})).status_code == 403
    home = await client.get("/")
    cross = await client.post("/signout", data={"csrf": form_value(home.text)},
                              headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
    assert await me(kc, session_id) == 200


async def test_revoking_the_token_ends_the_sessions_opened_with_it(client: httpx.AsyncClient, kc: Kernelcup,
                                                                   tokens: Tokens) -> None:
    session_id = await sign_in(client, tokens.bob)
    assert (await kc.handle(Request(actor=BOB, command="token", args={"revoke": True}))).ok
    assert await me(kc, session_id) == 401
    async with browser(kc, session_id) as copy:
        page = await copy.get("/")
    assert page.status_code == 200 and "Sign in" in page.text  # the pages still work, signed out
