"""Sessions of browsers signed in on the pages.

Signing in with an API token opens a session: the browser's cookie holds a random session id,
and the database only its sha256, so neither the cookie nor the database holds a credential
that works anywhere else. Signing out ends the session; revoking the token it was opened with
ends it too.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlmodel import Session, col, select, update

from kernelcup.core.access.tokens import digest
from kernelcup.core.store.models import ApiToken, User, WebSession

PREFIX = "kcs_"
LIFETIME = timedelta(days=30)


def open_session(session: Session, token: str, *, now: datetime, lifetime: timedelta = LIFETIME) -> str | None:
    """A new session id for a live token's owner; None for an unknown or revoked token."""
    row = session.exec(
        select(ApiToken).where(col(ApiToken.token_sha256) == digest(token), col(ApiToken.revoked_at).is_(None))
    ).first()
    if row is None or row.id is None:
        return None
    session_id = PREFIX + secrets.token_urlsafe(32)
    session.add(WebSession(session_sha256=digest(session_id), token_id=row.id, user_id=row.user_id,
                           created_at=now, expires_at=now + lifetime))
    return session_id


def session_user(session: Session, session_id: str, *, now: datetime) -> User | None:
    """Whose live session this is: not ended, not expired, its token not revoked."""
    if not session_id.startswith(PREFIX):
        return None
    return session.exec(
        select(User)
        .join(WebSession, col(WebSession.user_id) == col(User.id))
        .join(ApiToken, col(ApiToken.id) == col(WebSession.token_id))
        .where(col(WebSession.session_sha256) == digest(session_id), col(WebSession.ended_at).is_(None),
               col(WebSession.expires_at) > now, col(ApiToken.revoked_at).is_(None))
    ).first()


def end_session(session: Session, session_id: str, *, now: datetime) -> bool:
    """Sign out: the session id stops working at once, wherever the cookie was copied to."""
    result = session.execute(
        update(WebSession)
        .where(col(WebSession.session_sha256) == digest(session_id), col(WebSession.ended_at).is_(None))
        .values(ended_at=now)
    )
    return bool(getattr(result, "rowcount", 0))
