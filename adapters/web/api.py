"""The REST API's typed routes: reads, submitting a file, following a submission.

Writes go through ``Kernelcup.handle`` like every chat command, so size limits, bans, rate
limits, deadlines and pauses are the core's; reads come from ``boards`` and ``submissions``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Query, UploadFile
from fastapi import Request as HttpRequest
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from kernelcup.adapters.web import boards, submissions
from kernelcup.adapters.web.auth import AnyViewer, ApiError, App, SignedIn, Viewer, kernelcup, optional_viewer
from kernelcup.adapters.web.logs import LogGate, Reads, chunks
from kernelcup.adapters.web.replies import refusal_response, reply_response
from kernelcup.adapters.web.schemas import (
    Accepted,
    ErrorOut,
    HistoryPoint,
    JobEventOut,
    LeaderboardDetail,
    LeaderboardSummary,
    Me,
    Ranking,
    ReplyOut,
    SubmissionOut,
    SubmissionSummary,
    UserOut,
)
from kernelcup.adapters.web.settings import WebSettings
from kernelcup.adapters.web.streams import EventStreams, Stream
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import find_command
from kernelcup.core.messages import Attachment, Request
from kernelcup.core.pipeline.events import JobEvent, job_state
from kernelcup.core.store.db import session_scope

ERRORS: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorOut, "description": "no token, or an unknown one"},
    404: {"model": ErrorOut, "description": "unknown leaderboard, GPU, submission or user"},
}


def web_settings(request: HttpRequest) -> WebSettings:
    web: WebSettings = request.app.state.web
    return web


Web = Annotated[WebSettings, Depends(web_settings)]
ModeWord = Literal[find_command("submit").param("mode").choice_words()]  # type: ignore[valid-type]
router = APIRouter(prefix="/api", responses=ERRORS)


def event_out(event: JobEvent) -> JobEventOut:
    fields = {k: v for k, v in asdict(event).items() if k != "status"}
    return JobEventOut(**fields, state=job_state(event.status))


async def visible_submission_id(submission_id: int, viewer: Annotated[Viewer, Depends(optional_viewer)],
                                app: Annotated[Kernelcup, Depends(kernelcup)]) -> int:
    """404 before a stream starts, for an unknown submission or one on a hidden leaderboard."""
    def check() -> None:
        with session_scope(app.engine) as session:
            submissions.visible_submission(session, viewer, submission_id)

    await asyncio.to_thread(check)
    return submission_id


async def event_stream(submission_id: Annotated[int, Depends(visible_submission_id)],
                       request: HttpRequest) -> AsyncIterator[Stream]:
    """A slot among the capped streams, held until the response ends; refused before it starts."""
    streams: EventStreams = request.app.state.streams
    stream = streams.open(submission_id, request.client.host if request.client else "unknown")
    try:
        yield stream
    finally:
        streams.close(stream)


@router.get("/me", response_model=Me, tags=["users"])
async def me(viewer: SignedIn) -> Me:
    """Who the token belongs to, and the role the core gives them."""
    assert viewer.user_id is not None and viewer.identity is not None
    return Me(user_id=viewer.user_id, identity=viewer.identity, name=viewer.name, role=viewer.role.value)


@router.get("/leaderboards", response_model=list[LeaderboardSummary], tags=["leaderboards"])
async def list_leaderboards(viewer: AnyViewer, app: App, web: Web) -> list[LeaderboardSummary]:
    return await asyncio.to_thread(boards.list_leaderboards, app, web, viewer)


@router.get("/leaderboards/{name}", response_model=LeaderboardDetail, tags=["leaderboards"])
async def read_leaderboard(name: str, viewer: AnyViewer, app: App, web: Web) -> LeaderboardDetail:
    return await asyncio.to_thread(boards.leaderboard_detail, app, web, viewer, name)


@router.get("/leaderboards/{name}/rankings", response_model=list[Ranking], tags=["leaderboards"])
async def rankings(name: str, viewer: AnyViewer, app: App, gpu: str | None = None,
                   limit: Annotated[int, Query(ge=1, le=boards.MAX_RANKING)] = 50,
                   offset: Annotated[int, Query(ge=0)] = 0) -> list[Ranking]:
    """The ranking per GPU (every GPU of the leaderboard, or only ``gpu``)."""
    return await asyncio.to_thread(boards.rankings, app, viewer, name, gpu, limit, offset)


@router.get("/leaderboards/{name}/history", response_model=list[HistoryPoint], tags=["leaderboards"])
async def history(name: str, gpu: str, viewer: AnyViewer, app: App) -> list[HistoryPoint]:
    """Each improvement of the best ranked score on one GPU, oldest first."""
    return await asyncio.to_thread(boards.history, app, viewer, name, gpu)


@router.get("/submissions", response_model=list[SubmissionSummary], tags=["submissions"])
async def list_submissions(viewer: AnyViewer, app: App, web: Web, user_id: int | None = None,
                           leaderboard: str | None = None, mine: bool = False,
                           limit: Annotated[int, Query(ge=1, le=submissions.MAX_LIST)] = 20,
                           offset: Annotated[int, Query(ge=0)] = 0) -> list[SubmissionSummary]:
    """Newest first. ``mine=true`` (with a token): your own."""
    if mine:
        if viewer.user_id is None:
            raise ApiError(401, "mine=true needs a token.", kind="unauthenticated")
        user_id = viewer.user_id
    return await asyncio.to_thread(submissions.list_submissions, app, web, viewer, user_id=user_id,
                                   leaderboard=leaderboard, limit=limit, offset=offset)


@router.post("/submissions", status_code=202, response_model=Accepted, tags=["submissions"],
             responses={code: {"model": ErrorOut} for code in (403, 409, 413, 422, 429)})
async def submit(
    viewer: SignedIn,
    app: App,
    web: Web,
    file: Annotated[UploadFile, File(description="a .py file that defines custom_kernel, or .cu source")],
    mode: Annotated[ModeWord, Form(description="test, benchmark, ranked (or leaderboard), profile")],  # type: ignore[valid-type]
    leaderboard: Annotated[str | None, Form(description="default: the file's #!POPCORN leaderboard line")] = None,
    gpu: Annotated[list[str] | None, Form(description="GPUs (repeat the field); default: #!POPCORN gpus")] = None,
) -> JSONResponse:
    """Queue a submission and return its id at once; follow it with ``events_url`` (SSE) or by
    polling ``url``. 429 with Retry-After when a rate limit is reached."""
    content = await file.read()
    name = file.filename or "submission"
    request = Request(actor=viewer.actor, command="submit", reply_to="web",
                      args={"mode": mode, "file": name, "leaderboard": leaderboard, "gpu": gpu},
                      attachments=[Attachment(name, content)])
    reply = await app.handle(request)
    if reply.submission_id is None:
        return refusal_response(reply)
    sid = reply.submission_id
    accepted = Accepted(submission_id=sid, message=reply.text().splitlines()[0], url=web.url(f"/submissions/{sid}"),
                        events_url=web.url(f"/api/submissions/{sid}/events"),
                        report_url=web.url(f"/api/submissions/{sid}/report"))
    return JSONResponse(accepted.model_dump(mode="json"), status_code=202)


@router.get("/submissions/{submission_id}", response_model=SubmissionOut, tags=["submissions"])
async def read_submission(_: LogGate, submission_id: int, viewer: AnyViewer, app: App, web: Web,
                          reads: Reads) -> SubmissionOut:
    """Status while running (poll it), results when done; code and logs only where allowed, each
    log cut to its first 16 Ki characters with a link (``log_urls``) to the whole of it."""
    return await asyncio.to_thread(submissions.submission_detail, app, web, viewer, reads, submission_id)


@router.get("/submissions/{submission_id}/events", response_class=EventSourceResponse, tags=["submissions"],
            responses={429: {"model": ErrorOut, "description": "this client has its most streams open"},
                       503: {"model": ErrorOut, "description": "the server has its most streams open"}})
async def follow(submission_id: Annotated[int, Depends(visible_submission_id)],
                 stream: Annotated[Stream, Depends(event_stream)], viewer: AnyViewer, app: App,
                 web: Web, reads: Reads) -> AsyncIterator[ServerSentEvent]:
    """Server-sent events: ``progress`` (a job event) until every job has finished, then ``done``.
    Streams are capped per client and in total (429 / 503 with ``Retry-After``). A stream is
    shared by everyone watching; each viewer's events are cut to what they may see."""
    seen = await asyncio.to_thread(submissions.sight_of_submission, app, web, viewer, submission_id)
    async for event in stream.events():
        yield ServerSentEvent(event="progress", data=event_out(seen.event(event)).model_dump(mode="json"))
    detail = await asyncio.to_thread(submissions.submission_detail, app, web, viewer, reads, submission_id)
    yield ServerSentEvent(event="done", data={"submission_id": submission_id, "finished": detail.finished,
                                              "passed": detail.passed, "url": detail.url})


@router.get("/submissions/{submission_id}/report", response_model=ReplyOut, tags=["submissions"],
            responses={403: {"model": ErrorOut}})
async def report(_: LogGate, submission_id: int, viewer: AnyViewer, app: App, web: Web) -> JSONResponse:
    """The core's final report (what chat shows), logs whole: for whoever may see the code."""
    return await asyncio.to_thread(submissions.report_response, app, web, viewer, submission_id)


@router.get("/submissions/{submission_id}/logs/{name:path}", response_class=StreamingResponse,
            tags=["submissions"], responses={200: {"content": {"text/plain": {}}, "description": "the log, whole"},
                                             403: {"model": ErrorOut}})
async def read_log(_: LogGate, submission_id: int, name: str, gpu: str, viewer: AnyViewer, app: App, web: Web,
                   reads: Reads) -> StreamingResponse:
    """One log of the submission's run on ``gpu``, whole, as text (the links in ``log_urls``): for
    whoever may see the code."""
    body = await asyncio.to_thread(submissions.whole_log, app, web, viewer, reads, submission_id, gpu, name)
    return StreamingResponse(chunks(body), media_type="text/plain; charset=utf-8",
                             headers={"Content-Length": str(len(body))})


@router.post("/submissions/{submission_id}/cancel", response_model=ReplyOut, tags=["submissions"])
async def cancel(submission_id: int, viewer: SignedIn, app: App) -> JSONResponse:
    """Cancel the submission's unfinished jobs (yours, or anyone's for an admin)."""
    return reply_response(await app.handle(Request(actor=viewer.actor, command="cancel", args={"id": submission_id},
                                                   reply_to="web")))


@router.get("/users/{user_id}", response_model=UserOut, tags=["users"])
async def read_user(user_id: int, viewer: AnyViewer, app: App, web: Web) -> UserOut:
    return await asyncio.to_thread(submissions.user_detail, app, web, viewer, user_id)
