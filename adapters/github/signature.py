"""GitHub's webhook signature: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body>``
keyed with the webhook's secret. Only the SHA-256 header counts (the SHA-1 one is legacy)."""

from __future__ import annotations

import hashlib
import hmac

HEADER = "X-Hub-Signature-256"
PREFIX = "sha256="


def sign(secret: str, body: bytes) -> str:
    return PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verified(secret: str, body: bytes, header: str | None) -> bool:
    """True when ``header`` is the body's signature with ``secret``; compared in constant time."""
    if not secret or not header or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body), header.strip())
