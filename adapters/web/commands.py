"""Every core command as ``POST /api/commands/{name}``, generated from the command registry, so
a command added to the core (an admin command, say) appears in the API and its docs too.

The JSON body holds the command's parameters by name, plus ``attachments`` for commands that
take files. Roles are the core's: an admin command answers 403 to anyone else.
"""

from __future__ import annotations

import binascii
import inspect
from typing import Any, Literal

from fastapi import APIRouter, Body, Depends
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, create_model

from kernelcup.adapters.web.auth import ApiError, Viewer, kernelcup, signed_in_viewer
from kernelcup.adapters.web.replies import reply_response
from kernelcup.adapters.web.schemas import AttachmentIn, CommandInfo, ErrorOut, ReplyOut
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import commands
from kernelcup.core.commands.registry import Command, Kind, Param
from kernelcup.core.messages import Attachment, Request
from kernelcup.core.wire import attachment_from_wire

ATTACHMENTS = "attachments"
RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorOut}, **{code: {"model": ReplyOut} for code in (403, 404, 409, 413, 422, 429)}
}


def _annotation(param: Param) -> Any:
    base: Any
    if param.kind is Kind.INT:
        base = int
    elif param.kind is Kind.FLAG:
        base = bool
    elif param.kind is Kind.CHOICE and param.choices:
        base = Literal[param.choice_words()]  # the core reads an alias as its choice
    else:
        base = str
    return list[base] if param.many else base


def args_model(cmd: Command) -> type[BaseModel]:
    """A pydantic model of the command's parameters: OpenAPI documents it, FastAPI checks it."""
    fields: dict[str, Any] = {}
    for param in cmd.params:
        annotation = _annotation(param)
        # Files arrive as attachments; their parameter is only the file's name.
        required = param.required and param.kind not in (Kind.FILE, Kind.FOLDER)
        if required:
            fields[param.name] = (annotation, Field(description=param.help))
        elif param.kind is Kind.FLAG:
            fields[param.name] = (bool, Field(default=False, description=param.help))
        else:
            fields[param.name] = (annotation | None, Field(default=None, description=param.help))
    fields[ATTACHMENTS] = (list[AttachmentIn], Field(default_factory=list, description="files the command takes"))
    name = "".join(part.capitalize() for part in cmd.name.split("-")) + "Args"
    model: type[BaseModel] = create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
    return model


def attachments_of(items: list[AttachmentIn]) -> list[Attachment]:
    out = []
    for item in items:
        try:
            out.append(attachment_from_wire(item.model_dump()))
        except binascii.Error as exc:
            raise ApiError(422, f"Attachment {item.name} is not valid base64.") from exc
    return out


def _route(cmd: Command, model: type[BaseModel]) -> Any:
    async def run(body: BaseModel | None, viewer: Viewer, app: Kernelcup) -> JSONResponse:
        attachments = attachments_of(getattr(body, ATTACHMENTS) if body is not None else [])
        values = body.model_dump(exclude={ATTACHMENTS}) if body is not None else {}
        args = {k: v for k, v in values.items() if v is not None and v is not False}
        for param in cmd.params:  # a file's parameter defaults to its attachment's name
            if param.kind in (Kind.FILE, Kind.FOLDER) and param.name not in args and attachments:
                args[param.name] = attachments[0].name
        request = Request(actor=viewer.actor, command=cmd.name, args=args, attachments=attachments, reply_to="web")
        return reply_response(await app.handle(request))

    needs_body = any(p.required and p.kind not in (Kind.FILE, Kind.FOLDER) for p in cmd.params)
    run.__signature__ = inspect.Signature([  # type: ignore[attr-defined]
        inspect.Parameter("body", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation=model if needs_body else model | None,
                          default=Body(...) if needs_body else Body(None)),
        inspect.Parameter("viewer", inspect.Parameter.KEYWORD_ONLY, annotation=Viewer,
                          default=Depends(signed_in_viewer)),
        inspect.Parameter("app", inspect.Parameter.KEYWORD_ONLY, annotation=Kernelcup, default=Depends(kernelcup)),
    ], return_annotation=JSONResponse)
    return run


def command_router() -> APIRouter:
    router = APIRouter(prefix="/api/commands", tags=["commands"])
    listed = commands()

    @router.get("", response_model=list[CommandInfo])
    async def list_commands() -> list[CommandInfo]:
        """The registry: every command with its parameters and the role it needs."""
        return [
            CommandInfo(name=c.name, help=c.help, group=c.group, role=c.role.value, params=[
                {"name": p.name, "kind": p.kind.value, "help": p.help, "required": p.required, "many": p.many,
                 "choices": list(p.choices), "default": p.default} for p in c.params
            ])
            for c in listed
        ]

    for cmd in listed:
        router.add_api_route(
            f"/{cmd.name}", _route(cmd, args_model(cmd)), methods=["POST"], response_model=ReplyOut,
            summary=f"{cmd.name}: {cmd.help}", name=f"command_{cmd.name}",
            description=f"Needs the {cmd.role.value} role ({cmd.group} command). The reply's blocks are what "
                        "chat would show; refusals answer 403/404/409/413/422/429 with the same body.",
            responses=RESPONSES,
        )
    return router
