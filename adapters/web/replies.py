"""A core ``Reply`` as JSON, and the core's refusals as HTTP statuses.

The core decides every rule; this module only says how its verdict reads over HTTP.
"""

from __future__ import annotations

import math

from fastapi.responses import JSONResponse

from kernelcup.adapters.web.schemas import ErrorOut, reply_out
from kernelcup.core.messages import Reply, Text
from kernelcup.core.wire import reply_to_wire

__all__ = ["error_response", "refusal_response", "reply_out", "reply_response", "status_of"]

STATUS_BY_KIND = {
    "invalid": 422,
    "needs_choice": 422,
    "not_found": 404,
    "forbidden": 403,
    "too_large": 413,
    "refused": 409,
    "rate_limited": 429,
    "internal": 500,
}


def status_of(reply: Reply) -> int:
    """200 for anything the core answered without refusing (even ``ok=False``: a failed run or a
    confirmation prompt is an answer), else the refusal's status."""
    return STATUS_BY_KIND.get(reply.problem.kind, 422) if reply.problem else 200


def retry_headers(reply: Reply) -> dict[str, str]:
    if reply.problem is not None and reply.problem.retry_after_s is not None:
        return {"Retry-After": str(max(1, math.ceil(reply.problem.retry_after_s)))}
    return {}


def reply_response(reply: Reply) -> JSONResponse:
    return JSONResponse(reply_to_wire(reply), status_code=status_of(reply),
                        headers=retry_headers(reply))


def refusal_response(reply: Reply) -> JSONResponse:
    """A refused reply in the typed routes' error shape: message, hint, kind."""
    texts = [block for block in reply.blocks if isinstance(block, Text)]
    message = next((t.text for t in texts if t.style == "error"), reply.text())
    hint = next((t.text for t in texts if t.style == "hint"), "")
    kind = reply.problem.kind if reply.problem else "invalid"
    body = ErrorOut(detail=message, hint=hint, kind=kind, choices=reply.choices)
    return JSONResponse(body.model_dump(mode="json"), status_code=status_of(reply) if reply.problem else 422,
                        headers=retry_headers(reply))


def error_response(status: int, detail: str, hint: str = "", kind: str = "invalid",
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(ErrorOut(detail=detail, hint=hint, kind=kind).model_dump(mode="json"),
                        status_code=status, headers=headers)
