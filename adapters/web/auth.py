"""Who is asking: a personal API token (``Authorization: Bearer``), or, for the pages, a session
opened by signing in with that token (kernelcup.core.access.web_sessions: the cookie holds a session id, never the
token). The actor is the token owner's identity, so the core applies its usual roles, bans and
limits; the web adds no rule of its own.

The cookie is honoured only for reads (GET/HEAD): every write needs the header, so a page on
another site cannot make a signed-in browser submit or run an admin command. The two forms that
do use the cookie, sign in and sign out, carry a CSRF value (``csrf``).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends
from fastapi import Request as HttpRequest
from sqlalchemy.engine import Engine

from kernelcup.core.access.permissions import role_of
from kernelcup.core.access.tokens import token_owner
from kernelcup.core.access.web_sessions import session_user
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Role

COOKIE = "kernelcup_session"
TOKEN_HINT = "Get a token with `/leaderboard token` in chat (or `kernelcup token`) and send it as " \
             "`Authorization: Bearer <token>`."
SAFE_METHODS = ("GET", "HEAD")


class ApiError(Exception):
    """An HTTP refusal that is not the core's (authentication, unknown ids in a URL)."""

    def __init__(self, status: int, detail: str, hint: str = "", kind: str = "invalid",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.hint, self.kind = status, detail, hint, kind
        self.headers = headers or {}


def unauthenticated(detail: str) -> ApiError:
    return ApiError(401, detail, TOKEN_HINT, "unauthenticated", {"WWW-Authenticate": "Bearer"})


@dataclass(frozen=True)
class Viewer:
    user_id: int | None
    identity: str | None
    name: str
    role: Role
    csrf: str = ""  # for the sign-out form of a browser signed in with a session

    @property
    def signed_in(self) -> bool:
        return self.identity is not None

    @property
    def actor(self) -> Actor:
        assert self.identity is not None, "an anonymous viewer has no actor"
        return Actor(identity=self.identity, display_name=self.name)


ANONYMOUS = Viewer(user_id=None, identity=None, name="anonymous", role=Role.USER)


def kernelcup(request: HttpRequest) -> Kernelcup:
    app: Kernelcup = request.app.state.kernelcup
    return app


def _owner(engine: Engine, token: str) -> tuple[int, str, str] | None:
    with session_scope(engine) as session:
        user = token_owner(session, token)
        return None if user is None or user.id is None else (user.id, user.identity, user.display_name)


async def viewer_of(request: HttpRequest, app: Kernelcup, *, cookie_ok: bool) -> Viewer:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthenticated("The Authorization header must read `Bearer <token>`.")
    else:
        session_id = request.cookies.get(COOKIE, "") if cookie_ok else ""
        # An ended or expired session, or one whose token was revoked: the pages work, signed out.
        return (await viewer_for_session(app, session_id) if session_id else None) or ANONYMOUS
    if not token:
        return ANONYMOUS
    viewer = await viewer_for_token(app, token)
    if viewer is None:
        raise unauthenticated("That token is unknown or was revoked.")
    return viewer


def session_csrf(session_id: str) -> str:
    """The sign-out form's CSRF value: derived from the session id, which no page can read."""
    return hmac.new(session_id.encode(), b"kernelcup form", hashlib.sha256).hexdigest()


def _session_owner(app: Kernelcup, session_id: str) -> tuple[int, str, str] | None:
    with session_scope(app.engine) as session:
        user = session_user(session, session_id, now=app.now())
        return None if user is None or user.id is None else (user.id, user.identity, user.display_name)


async def viewer_for_session(app: Kernelcup, session_id: str) -> Viewer | None:
    owner = await asyncio.to_thread(_session_owner, app, session_id)
    if owner is None:
        return None
    user_id, identity, name = owner
    actor = Actor(identity=identity, display_name=name)
    return Viewer(user_id=user_id, identity=identity, name=name, role=role_of(actor, app.settings),
                  csrf=session_csrf(session_id))


async def viewer_for_token(app: Kernelcup, token: str) -> Viewer | None:
    """The token's owner with the role the core gives them; None for an unknown or revoked token."""
    owner = await asyncio.to_thread(_owner, app.engine, token)
    if owner is None:
        return None
    user_id, identity, name = owner
    actor = Actor(identity=identity, display_name=name)
    return Viewer(user_id=user_id, identity=identity, name=name, role=role_of(actor, app.settings))


async def optional_viewer(request: HttpRequest, app: Annotated[Kernelcup, Depends(kernelcup)]) -> Viewer:
    """Anyone may read public data; a token (or, for reads, the pages' cookie) shows more."""
    return await viewer_of(request, app, cookie_ok=request.method in SAFE_METHODS)


async def signed_in_viewer(request: HttpRequest, app: Annotated[Kernelcup, Depends(kernelcup)]) -> Viewer:
    viewer = await viewer_of(request, app, cookie_ok=request.method in SAFE_METHODS)
    if not viewer.signed_in:
        raise unauthenticated("This needs a personal API token.")
    return viewer


App = Annotated[Kernelcup, Depends(kernelcup)]
AnyViewer = Annotated[Viewer, Depends(optional_viewer)]
SignedIn = Annotated[Viewer, Depends(signed_in_viewer)]
