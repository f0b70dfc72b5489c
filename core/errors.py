"""Errors a user can cause: values with a clear message and a hint, rendered by every adapter."""

from __future__ import annotations

from typing import ClassVar


class UserError(Exception):
    """Something the requester can fix. Never carries a traceback to chat.

    ``kind`` names the sort of refusal in words every adapter can map (the web to HTTP statuses).
    """

    kind: ClassVar[str] = "invalid"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotFound(UserError):
    kind = "not_found"


class Forbidden(UserError):
    kind = "forbidden"


class TooLarge(UserError):
    """An upload over a size limit."""

    kind = "too_large"


class Refused(UserError):
    """The request is valid but not accepted now: deadline passed, paused, rate-limited, banned."""

    kind = "refused"


class RateLimited(Refused):
    """Too many requests; ``retry_after_s`` says when one more will be accepted."""

    kind = "rate_limited"

    def __init__(self, message: str, hint: str = "", retry_after_s: float | None = None) -> None:
        super().__init__(message, hint)
        self.retry_after_s = retry_after_s


class StoreUnavailable(Exception):
    """The database cannot be reached; the process says so in one line and stops."""


class SetupError(Exception):
    """The installation or the configuration cannot do what was asked: a bad setting, a package
    that is not installed. The operator's to fix: one message and a hint, no traceback."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
