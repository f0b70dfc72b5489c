"""The ASGI application: the REST API, the command routes generated from the registry, the pages
and their static files, around one ``Kernelcup``. Tests drive it through httpx's ASGI transport;
the adapter serves it with uvicorn."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi import Request as HttpRequest
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kernelcup.adapters.web import api
from kernelcup.adapters.web.auth import ANONYMOUS, ApiError
from kernelcup.adapters.web.commands import command_router
from kernelcup.adapters.web.logs import LogReads
from kernelcup.adapters.web.pages import make_templates, page_router
from kernelcup.adapters.web.replies import error_response
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.adapters.web.streams import EventStreams
from kernelcup.core.app import Kernelcup

STATIC = Path(__file__).resolve().parent / "static"
# The pages load nothing from elsewhere; /docs (Swagger UI from a CDN) is left without it.
CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
DESCRIPTION = """GPU-kernel leaderboards over HTTP: the same commands and rules as chat.

Authenticate with a personal token: `Authorization: Bearer <token>` (get one with `/leaderboard token`
in chat, or `kernelcup token`). Reads of public leaderboards need no token. Submit with
`POST /api/submissions` (multipart), then follow `GET /api/submissions/{id}/events` (server-sent
events) or poll `GET /api/submissions/{id}`. Every chat command is `POST /api/commands/{name}`."""


def _is_api(request: HttpRequest) -> bool:
    return request.url.path.startswith(("/api/", "/openapi", "/docs", "/redoc"))


class SecurityHeaders:
    """Plain ASGI (not BaseHTTPMiddleware), so server-sent event streams pass through untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with_csp = not str(scope["path"]).startswith(("/docs", "/redoc"))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("Referrer-Policy", "same-origin")
                if with_csp:
                    headers.setdefault("Content-Security-Policy", CSP)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(kernelcup: Kernelcup, web: WebSettings | None = None) -> FastAPI:
    web = web or WebSettings.load(kernelcup.settings)
    app = FastAPI(title="kernelcup", description=DESCRIPTION, version="1",
                  max_body_size=web.max_request_bytes,
                  servers=[{"url": web.public_url}] if web.public_url else None)
    app.state.kernelcup = kernelcup
    app.state.web = web
    app.state.log_reads = LogReads()
    app.state.streams = EventStreams(kernelcup.follow, web.max_event_streams, web.max_event_streams_per_client)
    templates = make_templates()
    app.include_router(api.router)
    app.include_router(command_router())
    app.include_router(page_router(templates))
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.add_middleware(SecurityHeaders)
    _handle_errors(app, templates)
    return app


def _handle_errors(app: FastAPI, templates: Jinja2Templates) -> None:
    """JSON for the API, a page for a browser."""

    def page(request: HttpRequest, status: int, message: str, hint: str = "") -> HTMLResponse:
        return templates.TemplateResponse(request, "error.html", {
            "viewer": ANONYMOUS, "status": status, "message": message, "hint": hint,
        }, status_code=status)

    @app.exception_handler(ApiError)
    async def api_error(request: HttpRequest, exc: ApiError) -> Response:
        if _is_api(request):
            return error_response(exc.status, exc.detail, exc.hint, exc.kind, exc.headers)
        return page(request, exc.status, exc.detail, exc.hint)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: HttpRequest, exc: StarletteHTTPException) -> Response:
        if _is_api(request) or exc.status_code == 413:
            return await http_exception_handler(request, exc)
        return page(request, exc.status_code, "There is no such page." if exc.status_code == 404 else str(exc.detail))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: HttpRequest, exc: RequestValidationError) -> Response:
        if _is_api(request):
            if "multipart/form-data" in request.headers.get("content-type", "") and request.url.path.startswith(
                "/api/commands/"
            ):
                hint = "Send JSON; files go in `attachments` as {name, base64} (README, Web and HTTP API)."
                return error_response(422, "This route takes a JSON body, not a form upload.", hint, "invalid")
            parameters = query_or_path_problem(exc.errors())
            if parameters is not None:
                return error_response(422, parameters, "The route's parameters are in /docs.", "invalid")
            # A body that is not UTF-8 must not break the answer: the error echoes no raw bytes.
            errors = [{**e, "input": "(not shown)"} if isinstance(e.get("input"), bytes) else e for e in exc.errors()]
            return await request_validation_exception_handler(request, RequestValidationError(errors))
        return page(request, 404, "There is no such page.", "Check the address.")


def query_or_path_problem(errors: Sequence[Any]) -> str | None:
    """A missing or wrong query or path parameter in the documented error shape's words (one
    sentence per parameter); None where a body field is wrong: its list says where in the body."""
    if not errors or any(not e.get("loc") or e["loc"][0] not in ("query", "path") for e in errors):
        return None
    said = []
    for error in errors:
        where, name = error["loc"][0], ".".join(str(part) for part in error["loc"][1:])
        if error.get("type") == "missing":
            said.append(f"The {where} parameter {name} is missing.")
        else:
            said.append(f"The {where} parameter {name} is wrong: {error.get('msg', 'invalid')}.")
    return " ".join(said)
