"""The server-rendered pages: leaderboards, a leaderboard's rankings, a user, a submission.

The same reads as the API (``boards``, ``submissions``); a little JavaScript counts deadlines
down, switches the GPU shown, and follows a running submission over server-sent events.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Protocol

from fastapi import APIRouter, Form
from fastapi import Request as HttpRequest
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from kernelcup.adapters.web import boards, markdown, submissions
from kernelcup.adapters.web.api import Web
from kernelcup.adapters.web.auth import ANONYMOUS, COOKIE, AnyViewer, App, Viewer, session_csrf
from kernelcup.adapters.web.charts import Point, Series, score_chart
from kernelcup.adapters.web.csrf import FORM_COOKIE, check_form, form_nonce
from kernelcup.adapters.web.logs import LogGate, Reads
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.core.access.web_sessions import LIFETIME as SESSION_LIFETIME
from kernelcup.core.access.web_sessions import end_session, open_session
from kernelcup.core.app import Kernelcup
from kernelcup.core.pipeline.report import format_case, format_seconds
from kernelcup.core.store.db import session_scope
from kernelcup.core.when import relative, show_utc

TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_PROGRESS_CHARTS = 6


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES))
    env = templates.env
    env.filters["seconds"] = format_seconds
    env.filters["utc"] = show_utc
    env.filters["case"] = format_case
    env.filters["markdown"] = markdown.render
    env.globals["relative"] = relative
    return templates


class Render(Protocol):
    def __call__(self, request: HttpRequest, name: str, viewer: Viewer, app: Kernelcup,
                 **context: Any) -> HTMLResponse: ...


def page_router(templates: Jinja2Templates) -> APIRouter:
    def render(request: HttpRequest, name: str, viewer: Viewer, app: Kernelcup, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"viewer": viewer, "now": app.now(), **context})

    router = APIRouter(include_in_schema=False)
    router.include_router(_reading_pages(render))
    router.include_router(_signin_pages(render))
    return router


def _leaderboard_page(app: Kernelcup, web: WebSettings, viewer: Viewer, name: str) -> dict[str, Any]:
    detail = boards.leaderboard_detail(app, web, viewer, name)
    ranked = boards.rankings(app, viewer, name, None, limit=50)
    charts = {
        r.gpu: score_chart(
            [Series("best", [Point(p.at, p.score_s, f"{p.user_name} · {format_seconds(p.score_s)} · "
                                                    f"#{p.submission_id}")
                             for p in boards.history(app, viewer, name, r.gpu)])],
            title=f"Best score on {r.gpu} over time", now=app.now())
        for r in ranked
    }
    return {"board": detail, "rankings": ranked, "charts": charts}


def _user_page(app: Kernelcup, web: WebSettings, viewer: Viewer, user_id: int) -> dict[str, Any]:
    person = submissions.user_detail(app, web, viewer, user_id)
    progress = submissions.user_progress(app, viewer, user_id)
    charts = [
        (board, gpu, score_chart([Series("best so far", [Point(at, score) for at, score in points])],
                                 title=f"{person.name} on {board} ({gpu})", now=app.now()))
        for (board, gpu), points in list(progress.items())[:MAX_PROGRESS_CHARTS]
    ]
    return {"person": person, "charts": charts}


def _reading_pages(render: Render) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    @router.get("/", response_class=HTMLResponse)
    async def home(request: HttpRequest, viewer: AnyViewer, app: App, web: Web) -> HTMLResponse:
        listed = await asyncio.to_thread(boards.list_leaderboards, app, web, viewer)
        return render(request, "leaderboards.html", viewer, app, boards=listed)

    @router.get("/leaderboards/{name}", response_class=HTMLResponse)
    async def leaderboard(request: HttpRequest, name: str, viewer: AnyViewer, app: App, web: Web,
                          gpu: str | None = None) -> HTMLResponse:
        data = await asyncio.to_thread(_leaderboard_page, app, web, viewer, name)
        gpus = [r.gpu for r in data["rankings"]]
        busiest = max(data["rankings"], key=lambda r: len(r.entries)).gpu if gpus else None
        chosen = next((g for g in gpus if gpu and g.lower() == gpu.lower()), busiest)
        return render(request, "leaderboard.html", viewer, app, chosen=chosen, **data)

    @router.get("/users/{user_id}", response_class=HTMLResponse)
    async def user(request: HttpRequest, user_id: int, viewer: AnyViewer, app: App, web: Web) -> HTMLResponse:
        return render(request, "user.html", viewer, app, **await asyncio.to_thread(_user_page, app, web, viewer,
                                                                                   user_id))

    @router.get("/submissions/{submission_id}", response_class=HTMLResponse)
    async def submission(_: LogGate, request: HttpRequest, submission_id: int, viewer: AnyViewer, app: App,
                         web: Web, reads: Reads) -> HTMLResponse:
        detail = await asyncio.to_thread(submissions.submission_detail, app, web, viewer, reads, submission_id)
        return render(request, "submission.html", viewer, app, sub=detail, outcome=submissions.outcome)

    return router


def _signin_pages(render: Render) -> APIRouter:
    router = APIRouter(include_in_schema=False)

    def signin_page(request: HttpRequest, viewer: Viewer, app: Kernelcup, error: str = "") -> HTMLResponse:
        """The form carries a fresh CSRF value, also set in a cookie only this form's POST sees."""
        nonce = form_nonce()
        response = render(request, "signin.html", viewer, app, error=error, form_value=nonce)
        response.set_cookie(FORM_COOKIE, nonce, httponly=True, samesite="strict", max_age=3600, path="/signin")
        return response

    @router.get("/signin", response_class=HTMLResponse)
    async def signin_form(request: HttpRequest, viewer: AnyViewer, app: App) -> HTMLResponse:
        return signin_page(request, viewer, app)

    @router.post("/signin", response_class=HTMLResponse)
    async def signin(request: HttpRequest, app: App, web: Web, token: str = Form(""),
                     csrf: str = Form("")) -> Response:
        """A session opens for the token's owner; its id, never the token, goes into an HttpOnly
        cookie honoured for reads only (see ``auth``)."""
        check_form(request, request.cookies.get(FORM_COOKIE, ""), csrf, web.public_url)

        def open_for_token() -> str | None:
            with session_scope(app.engine) as session:
                return open_session(session, token.strip(), now=app.now()) if token.strip() else None

        session_id = await asyncio.to_thread(open_for_token)
        if session_id is None:
            return signin_page(request, ANONYMOUS, app, "That token is unknown or was revoked.")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, session_id, httponly=True, samesite="strict",
                            max_age=int(SESSION_LIFETIME.total_seconds()),
                            secure=web.public_url.startswith("https://"))
        response.delete_cookie(FORM_COOKIE, path="/signin")
        return response

    @router.post("/signout")
    async def signout(request: HttpRequest, app: App, web: Web, csrf: str = Form("")) -> Response:
        """Ends the session itself, so a copied cookie stops working too."""
        session_id = request.cookies.get(COOKIE, "")
        if session_id:
            check_form(request, session_csrf(session_id), csrf, web.public_url)

            def end() -> None:
                with session_scope(app.engine) as session:
                    end_session(session, session_id, now=app.now())

            await asyncio.to_thread(end)
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE)
        return response

    return router
