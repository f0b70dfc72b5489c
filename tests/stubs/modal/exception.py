"""``modal.exception`` as modal 1.6 defines the classes kernelcup meets (modal/exception.py):
the same names and the same bases, so ``isinstance`` checks read as they do against Modal."""

from __future__ import annotations


class Error(Exception):
    """Base class for all Modal errors."""


class AuthError(Error):
    """Missing or invalid credentials."""


class NotFoundError(Error):
    """A requested resource (an app, a function, a call) was not found."""


class ResourceExhaustedError(Error):
    """A quota or rate limit was reached."""


class InvalidError(Error):
    """The user did something invalid."""


class RemoteError(Error):
    """An error on the Modal server; also what ``get`` raises for a terminated (cancelled) input."""


class TimeoutError(Error):  # modal's own: neither the builtin nor a subclass of it
    """Base class for Modal timeouts."""


class FunctionTimeoutError(TimeoutError):
    """A function call ran past its function's ``timeout``."""


class OutputExpiredError(TimeoutError):
    """The call ended so long ago that its output was dropped."""


class ConnectionError(Error):
    """The Modal server could not be reached."""


class ExecutionError(Error):
    """Something went wrong executing the call, e.g. its exception could not be deserialized here."""


class InputCancellation(BaseException):
    """Raised inside a sync function when its input is cancelled (a BaseException, as in Modal)."""
