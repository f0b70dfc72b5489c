"""Personal API tokens: issued once, stored as sha256, looked up by the web adapter.

A token is random (256 bits), so a plain sha256 is enough to keep the stored form useless to a
reader of the database; no salt or slow hash is needed as it would be for a password.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from sqlmodel import Session, col, select, update

from kernelcup.core.store.models import ApiToken, User

PREFIX = "kc_"  # lets secret scanners and people recognise a kernelcup token


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def issue_token(session: Session, user: User, *, label: str, now: datetime) -> str:
    """A new token for ``user``; the caller shows it once, only its digest is kept."""
    assert user.id is not None
    token = PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(user_id=user.id, token_sha256=digest(token), label=label[:200], created_at=now))
    return token


def revoke_tokens(session: Session, user: User, *, now: datetime) -> int:
    """Revoke every live token of ``user``; how many there were."""
    result = session.execute(
        update(ApiToken)
        .where(col(ApiToken.user_id) == user.id, col(ApiToken.revoked_at).is_(None))
        .values(revoked_at=now)
    )
    return int(getattr(result, "rowcount", 0) or 0)


def token_owner(session: Session, token: str) -> User | None:
    """The user a live token belongs to, or None for an unknown or revoked token."""
    if not token.startswith(PREFIX):
        return None
    return session.exec(
        select(User)
        .join(ApiToken, col(ApiToken.user_id) == col(User.id))
        .where(col(ApiToken.token_sha256) == digest(token), col(ApiToken.revoked_at).is_(None))
    ).first()
