"""Slack's events as core requests: the slash command, shared files, the submission form and
the GPU menu. Every listener acknowledges at once (Slack gives 3 seconds) and continues in a
background task, so a slow database or download never makes Slack show "operation timed out".
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import structlog
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext
from slack_sdk.errors import SlackApiError

from kernelcup.adapters.background import Spawn
from kernelcup.adapters.slack.blocks import GPU_CHOICE_ACTION, GPU_SUBMIT_ACTION, render, with_slack_help
from kernelcup.adapters.slack.conversation import Conversation, Destination
from kernelcup.adapters.slack.files import download
from kernelcup.adapters.slack.modal import CALLBACK_ID, LEADERBOARD_ACTION, form_channel, form_values, submit_view
from kernelcup.adapters.slack.parsing import file_comment, slash_command, wants_bot
from kernelcup.adapters.slack.people import People
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import find_command
from kernelcup.core.commands.leaderboard import MAX_BUNDLE_BYTES
from kernelcup.core.commands.registry import Kind
from kernelcup.core.errors import UserError
from kernelcup.core.messages import Actor, Attachment, Reply, Request, Text

log = structlog.get_logger("kernelcup.slack")
Ack = Callable[..., Awaitable[Any]]
SEEN_MESSAGES = 1024  # Slack re-sends an event it thinks was not acknowledged: act on it once
DM_HINT = ("I act on commands such as `help`, `list` or `show <leaderboard>`, and on files: share your kernel "
           "with `submit ranked <leaderboard>` as the message.")


class Listeners:
    def __init__(self, app: Kernelcup, conversation: Conversation, people: People, http: aiohttp.ClientSession,
                 *, command: str, bot_token: str, spawn: Spawn) -> None:
        self.app = app
        self.conversation = conversation
        self.client = conversation.client
        self.people = people
        self.http = http
        self.command = command
        self.bot_token = bot_token
        self.spawn = spawn
        self._seen: OrderedDict[str, None] = OrderedDict()

    def attach(self, bolt: AsyncApp) -> None:
        bolt.command(self.command)(self._on_command)
        bolt.event("message")(self._on_message)
        bolt.event("file_shared")(self._on_file_shared)
        bolt.view(CALLBACK_ID)(self._on_form_submit)
        bolt.action(LEADERBOARD_ACTION)(self._on_form_leaderboard)
        bolt.action(GPU_SUBMIT_ACTION)(self._on_gpu_submit)
        bolt.action(GPU_CHOICE_ACTION)(self._on_gpu_pick)

    # -- the slash command ------------------------------------------------------------------

    async def _on_command(self, ack: Ack, body: dict[str, Any]) -> None:
        await ack()
        self.spawn(self.slash(body))

    async def slash(self, body: dict[str, Any]) -> None:
        team, user = str(body.get("team_id", "")), str(body.get("user_id", ""))
        destination = Destination(str(body.get("channel_id", "")), user, team, body.get("response_url"))
        actor = await self.people.actor(team, user, body.get("user_name"))
        try:
            name, args = slash_command(str(body.get("text") or ""), team)
        except UserError as exc:  # an unknown or malformed subcommand: say why, then show help
            await self.help(actor, destination, Reply.error(exc.message, exc.hint))
            return
        if name == "help":
            await self.help(actor, destination, None, args)
        elif name == "submit":
            await self.open_form(body, destination, args)
        elif any(p.kind in (Kind.FILE, Kind.FOLDER) and p.required for p in find_command(name).params):
            await self.conversation.ephemeral(destination, render(Reply([Text(
                f"Slash commands cannot carry files: share the files with me (a zip, or task.yml and the rest) "
                f"with `{name} ...` as the message.", style="hint")])))
        else:
            await self.conversation.run(Request(actor, name, args), destination)

    async def help(self, actor: Actor, destination: Destination, error: Reply | None,
                   args: dict[str, Any] | None = None) -> None:
        reply = await self.app.handle(Request(actor, "help", args or {}))
        if error is not None:
            reply.blocks[:0] = error.blocks
        await self.conversation.ephemeral(destination, render(with_slack_help(reply, self.command), max_chars=2900))

    async def open_form(self, body: dict[str, Any], destination: Destination, args: dict[str, Any]) -> None:
        leaderboards = await self.app.complete(Kind.LEADERBOARD, "", {})
        if not leaderboards:
            await self.conversation.ephemeral(destination, render(Reply.error("There are no leaderboards yet.")))
            return
        board = args.get("leaderboard")
        gpus = await self.app.complete(Kind.GPU, "", {"leaderboard": board})
        view = submit_view(leaderboards=leaderboards, gpus=gpus, channel=destination.channel, leaderboard=board,
                           mode=args.get("mode"), chosen_gpus=args.get("gpu"))
        try:
            await self.client.views_open(trigger_id=str(body.get("trigger_id")), view=view)
        except SlackApiError as exc:  # e.g. expired_trigger_id: the form must open within 3 s
            log.warning("views.open failed", error=exc.response.get("error"))
            await self.conversation.ephemeral(destination, render(Reply.error(
                f"The submission form could not open ({exc.response.get('error')}).",
                f"Run `{self.command} submit` again, or share the file with me.")))

    # -- the submission form ----------------------------------------------------------------

    async def _on_form_leaderboard(self, ack: Ack, body: dict[str, Any]) -> None:
        await ack()
        self.spawn(self.narrow_gpus(body))

    async def narrow_gpus(self, body: dict[str, Any]) -> None:
        view = body.get("view") or {}
        values = form_values(view)
        leaderboards = await self.app.complete(Kind.LEADERBOARD, "", {})
        gpus = await self.app.complete(Kind.GPU, "", {"leaderboard": values.leaderboard})
        new_view = submit_view(leaderboards=leaderboards, gpus=gpus, channel=form_channel(view),
                               leaderboard=values.leaderboard, mode=values.mode, chosen_gpus=values.gpus)
        await self.client.views_update(view_id=str(view.get("id")), hash=view.get("hash"), view=new_view)

    async def _on_form_submit(self, ack: Ack, body: dict[str, Any]) -> None:
        await ack()
        self.spawn(self.form_submitted(body))

    async def form_submitted(self, body: dict[str, Any]) -> None:
        who = body.get("user") or {}
        team = str(who.get("team_id") or (body.get("team") or {}).get("id") or "")
        user = str(who.get("id") or "")
        view = body.get("view") or {}
        destination = Destination(form_channel(view) or await self.conversation.dm_channel(user), user, team)
        values = form_values(view)
        actor = await self.people.actor(team, user, who.get("name") or who.get("username"))
        try:
            attachments = await self.attachments(values.files, text_only=True)
        except UserError as exc:
            await self.conversation.ephemeral(destination, render(Reply.error(exc.message, exc.hint)))
            return
        args = {"mode": values.mode or "test", "leaderboard": values.leaderboard, "gpu": values.gpus}
        await self.conversation.run(Request(actor, "submit", args, attachments), destination)

    # -- shared files -----------------------------------------------------------------------

    async def _on_message(self, event: dict[str, Any], body: dict[str, Any], context: AsyncBoltContext) -> None:
        if event.get("bot_id") or event.get("subtype") not in (None, "file_share") or not event.get("user"):
            return
        if self._seen_before(f"{event.get('channel')}/{event.get('ts')}"):
            return
        self.spawn(self.message(event, str(event.get("team") or body.get("team_id") or ""), context.bot_user_id))

    async def message(self, event: dict[str, Any], team: str, bot_user: str | None) -> None:
        text, files = str(event.get("text") or ""), list(event.get("files") or [])
        in_dm = event.get("channel_type") == "im"
        if not (in_dm or (files and wants_bot(text, team, bot_user))):
            return  # files and chatter in a channel that are not for the bot
        user = str(event["user"])
        destination = Destination(str(event.get("channel", "")), user, team)
        if not files and not wants_bot(text, team, bot_user):  # chatter in a DM
            await self.conversation.ephemeral(destination, render(Reply([Text(DM_HINT, style="hint")])))
            return
        try:
            name, args = file_comment(text, team, bot_user)
            attachments = await self.attachments(files, text_only=name == "submit")
        except UserError as exc:
            await self.conversation.ephemeral(destination, render(Reply.error(exc.message, exc.hint)))
            return
        actor = await self.people.actor(team, user)
        if name == "help":
            await self.help(actor, destination, None, args)
            return
        await self.conversation.run(Request(actor, name, args, attachments), destination)

    def _seen_before(self, key: str) -> bool:
        if key in self._seen:
            return True
        self._seen[key] = None
        while len(self._seen) > SEEN_MESSAGES:
            self._seen.popitem(last=False)
        return False

    async def _on_file_shared(self, event: dict[str, Any]) -> None:
        """Slack also sends the message event for the same file, with its comment, which is the
        one acted on; this event (file id only, no comment) is acknowledged and left alone."""

    async def attachments(self, files: list[dict[str, Any]], *, text_only: bool) -> list[Attachment]:
        limit = self.app.settings.limits.max_file_bytes if text_only else MAX_BUNDLE_BYTES
        return [await download(self.http, f, token=self.bot_token, max_bytes=limit, text_only=text_only,
                               api_base=self.client.base_url) for f in files]

    # -- the GPU menu -----------------------------------------------------------------------

    async def _on_gpu_pick(self, ack: Ack) -> None:
        await ack()  # the choice is read from the message's state when the button is pressed

    async def _on_gpu_submit(self, ack: Ack, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        token = str(action.get("value") or "")
        state = (body.get("state") or {}).get("values") or {}
        picked = (state.get(f"gpu_choice:{token}") or {}).get(GPU_CHOICE_ACTION) or {}
        gpus = [str(o["value"]) for o in picked.get("selected_options") or []]
        user = str((body.get("user") or {}).get("id") or "")
        self.spawn(self.conversation.choose_gpus(token, gpus, user, body.get("response_url")))
