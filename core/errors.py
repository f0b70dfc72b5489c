"""Errors a user can cause: values with a clear message and a hint, rendered by every adapter."""

from __future__ import annotations


class UserError(Exception):
    """Something the requester can fix. Never carries a traceback to chat."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class NotFound(UserError):
    pass


class Forbidden(UserError):
    pass


class Refused(UserError):
    """The request is valid but not accepted now: deadline passed, paused, rate-limited, banned."""


class StoreUnavailable(Exception):
    """The database cannot be reached; the process says so in one line and stops."""
