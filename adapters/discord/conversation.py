"""One slash command, from the moment Discord sends it to the last message about it.

Answers that concern only the asker (errors, menus, confirmations, ``mine``) are ephemeral;
everything else is public. A command that uploads files is deferred at once (privately, so a
refusal stays private), then a public follow-up carries the result; any other command is answered
at once when the core is quick, and deferred otherwise.

A submission's message is kept in the core as the submission's ``reply_to`` (``origin.py``), so
when the bot connects again after a restart it follows the submissions it still owes a report.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Coroutine
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import discord
import structlog

from kernelcup.adapters.discord.follow import SubmissionFollower, accepted_embed
from kernelcup.adapters.discord.live import LiveMessage
from kernelcup.adapters.discord.origin import PREFIX, Origin, user_id_of
from kernelcup.adapters.discord.render import Rendered, batches, discord_files, render_reply
from kernelcup.adapters.discord.settings import DiscordSettings
from kernelcup.adapters.discord.tree import CONFIRM_PARAM, modal_params, options_of
from kernelcup.adapters.discord.views import Confirm, FieldsModal, GpuMenu, Pager
from kernelcup.core.commands.catalog import find_command
from kernelcup.core.commands.leaderboard import MAX_BUNDLE_BYTES
from kernelcup.core.commands.registry import Command, Kind
from kernelcup.core.config import Settings
from kernelcup.core.errors import UserError
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.messages import Actor, Attachment, Reply, Request, Text
from kernelcup.core.pipeline.delivery import owed_here, remember_reply_to

if TYPE_CHECKING:
    from kernelcup.core.app import Kernelcup

log = structlog.get_logger("kernelcup.discord")

_MENTION = re.compile(r"<@!?(\d+)>|(\d{15,25})")


def actor_of(user: discord.User | discord.Member) -> Actor:
    """The core's view of a Discord user; roles by id and by name, for ``roles:`` in config."""
    roles: list[str] = []
    if isinstance(user, discord.Member):
        for role in user.roles:
            if not role.is_default():
                roles += [f"discord-role:{role.id}", f"discord-role:{role.name}"]
    return Actor(identity=f"discord:{user.id}", display_name=user.display_name, platform_roles=tuple(roles))


def identity_of(text: str) -> str:
    """A user option: a mention or a bare id is a Discord user; anything else an identity as is."""
    match = _MENTION.fullmatch(text.strip())
    return f"discord:{match.group(1) or match.group(2)}" if match else text.strip()


def takes_files(cmd: Command) -> bool:
    return any(p.kind in (Kind.FILE, Kind.FOLDER) for p in cmd.params)


def needs_confirmation(cmd: Command, reply: Reply) -> bool:
    """The core's way to ask: refused with a warning, no error, and a confirm flag to set."""
    styles = {b.style for b in reply.blocks if isinstance(b, Text)}
    has_flag = any(p.name == CONFIRM_PARAM and p.kind is Kind.FLAG for p in cmd.params)
    return has_flag and not reply.ok and "warning" in styles and "error" not in styles


class Conversations:
    def __init__(self, client: discord.Client, settings: Settings, config: DiscordSettings,
                 clock: Callable[[], datetime]) -> None:
        self.client = client
        self.settings = settings
        self.config = config
        self.clock = clock
        self.app: Kernelcup | None = None
        self.follower: SubmissionFollower | None = None
        self.following: set[asyncio.Task[None]] = set()  # submissions being followed
        self.followed: set[int] = set()  # their ids, so a reconnect does not follow one twice
        self.active: set[asyncio.Task[Any]] = set()  # interactions being answered

    def attach(self, app: Kernelcup) -> None:
        self.app = app
        self.follower = SubmissionFollower(app, self.client, private_threads=self.config.private_threads,
                                           edit_interval_s=self.config.edit_interval_s)

    def _app(self) -> Kernelcup:
        if self.app is None:
            raise RuntimeError("the Discord adapter serves no kernelcup yet (attach() first)")
        return self.app

    async def complete(self, kind: Kind, prefix: str, args: dict[str, Any]) -> list[str]:
        try:
            return await self._app().complete(kind, prefix, args)
        except Exception:
            log.exception("autocomplete failed", kind=kind.value)
            return []

    async def on_command(self, interaction: discord.Interaction, cmd: Command, values: dict[str, Any]) -> None:
        await self._guarded(interaction, self._command(interaction, cmd, values))

    async def _command(self, interaction: discord.Interaction, cmd: Command, values: dict[str, Any]) -> None:
        fields = modal_params(cmd)
        if fields:
            on_fields = partial(self._fields_given, cmd=cmd, values=values)
            await interaction.response.send_modal(FieldsModal(f"/{cmd.group} {cmd.name}", fields, on_fields))
            return
        refusal = self._channel_refusal(interaction, cmd)
        if refusal is not None:
            await self._private(interaction, refusal)
            return
        if takes_files(cmd):
            await interaction.response.defer(ephemeral=True, thinking=True)
        await self._run(interaction, await self._request(interaction, cmd, values))

    async def _fields_given(self, interaction: discord.Interaction, fields: dict[str, str], *, cmd: Command,
                            values: dict[str, Any]) -> None:
        async def go() -> None:
            await interaction.response.defer(ephemeral=True, thinking=True)
            request = await self._request(interaction, cmd, values)
            request.args.update({name: value.strip() for name, value in fields.items() if value.strip()})
            await self._run(interaction, request)

        await self._guarded(interaction, go())

    async def _guarded(self, interaction: discord.Interaction, work: Coroutine[Any, Any, None]) -> None:
        """Run one step of a conversation; whatever happens, the bot keeps serving."""
        task = asyncio.current_task()
        if task is not None:
            self.active.add(task)
        try:
            await work
        except UserError as exc:
            await self._tell(interaction, Reply.error(exc.message, exc.hint))
        except Exception:
            incident = uuid.uuid4().hex[:8]
            log.exception("discord interaction failed", incident=incident, interaction_id=interaction.id)
            await self._tell(interaction, Reply.error(f"Something went wrong on our side (incident {incident}).",
                                                      "Try again in a moment; an admin can look the incident up."))
        finally:
            if task is not None:
                self.active.discard(task)

    async def close(self, grace_s: float = 5.0) -> None:
        """Let answers in flight finish (briefly), then stop following submissions."""
        if self.active:
            await asyncio.wait(set(self.active), timeout=grace_s)
        for task in [*self.active, *self.following]:
            task.cancel()
        await asyncio.gather(*self.active, *self.following, return_exceptions=True)

    async def _tell(self, interaction: discord.Interaction, reply: Reply) -> None:
        try:
            await self._private(interaction, reply)
        except discord.HTTPException as error:
            log.warning("could not tell the user", status=error.status, code=error.code)

    def _channel_refusal(self, interaction: discord.Interaction, cmd: Command) -> Reply | None:
        allowed = set(self.config.submission_channels)
        if not allowed or not any(p.kind is Kind.FILE for p in cmd.params):
            return None
        here = {interaction.channel_id}
        if isinstance(interaction.channel, discord.Thread):
            here.add(interaction.channel.parent_id)
        if here & allowed:
            return None
        where = ", ".join(f"<#{channel}>" for channel in sorted(allowed))
        return Reply.error("Submissions are not taken in this channel.", f"Use /leaderboard {cmd.name} in {where}.")

    async def _request(self, interaction: discord.Interaction, cmd: Command, values: dict[str, Any]) -> Request:
        args: dict[str, Any] = {}
        attachments: list[Attachment] = []
        for option, param in options_of(cmd):
            value = values.get(option)
            if value is None:
                continue
            if isinstance(value, discord.Attachment):
                attachments.append(await self._download(value, param))
                if option == param.name:
                    args[param.name] = value.filename
            elif param.kind is Kind.USER and isinstance(value, str):
                args[param.name] = identity_of(value)
            else:
                args[param.name] = value
        where = Origin(interaction.guild_id, interaction.channel_id) if interaction.channel_id else None
        return Request(actor=actor_of(interaction.user), command=cmd.name, args=args, attachments=attachments,
                       reply_to=where.reply_to if where else None, pictures=True)

    async def _download(self, attachment: discord.Attachment, param: Any) -> Attachment:
        limit = MAX_BUNDLE_BYTES if param.kind is Kind.FOLDER else self.settings.limits.max_file_bytes
        shown = shown_file_name(attachment.filename)  # the uploader's words: no folders, no hidden characters
        if attachment.size > limit:
            raise UserError(f"{shown} is {attachment.size / 1024:.0f} KiB; the limit is "
                            f"{limit // 1024} KiB.", "Attach the source only, without data or binaries.")
        try:
            content = await attachment.read()
        except discord.HTTPException as error:
            log.warning("attachment download failed", file=attachment.filename, status=error.status)
            raise UserError(f"Could not fetch {shown} from Discord (HTTP {error.status}).",
                            "Attach the file again.") from error
        return Attachment(attachment.filename, content)

    async def _run(self, interaction: discord.Interaction, request: Request) -> None:
        """Run the request in the core; answer at once when it is quick, defer when it is not."""
        app = self._app()
        if interaction.response.is_done():
            reply = await app.handle(request)
        else:
            task = asyncio.create_task(app.handle(request))
            done, _ = await asyncio.wait({task}, timeout=self.config.respond_within_s)
            if not done:
                await interaction.response.defer(ephemeral=True, thinking=True)
            reply = await task
        await self._answer(interaction, request, reply)

    async def _answer(self, interaction: discord.Interaction, request: Request, reply: Reply) -> None:
        cmd = find_command(request.command)
        owner = interaction.user.id
        gpus = (reply.choices or {}).get("gpu")
        if gpus:
            question = Reply([Text(reply.blocks[0].fallback()), Text("Pick one or more below.", style="hint")],
                             ephemeral=True)
            await self._private(interaction, question, view=GpuMenu(owner, gpus, partial(self._gpus_picked,
                                                                                           request=request)))
        elif needs_confirmation(cmd, reply):
            confirm = Confirm(owner, f"Yes, {cmd.name}", partial(self._confirmed, request=request))
            await self._private(interaction, reply, view=confirm)
        elif not reply.ok or reply.ephemeral:
            await self._private(interaction, reply)
        elif reply.submission_id is not None:
            await self._submission(interaction, reply, reply.submission_id)
        else:
            await self._public(interaction, render_reply(reply, page_chars=self.config.page_chars,
                                                         file_limit=interaction.filesize_limit))

    async def _gpus_picked(self, interaction: discord.Interaction, gpus: list[str], *, request: Request) -> None:
        async def go() -> None:
            await interaction.response.defer()  # the menu message is edited with the outcome
            request.args["gpu"] = gpus
            await self._run(interaction, request)

        await self._guarded(interaction, go())

    async def _confirmed(self, interaction: discord.Interaction, *, request: Request) -> None:
        async def go() -> None:
            await interaction.response.defer()
            request.args[CONFIRM_PARAM] = True
            await self._run(interaction, request)

        await self._guarded(interaction, go())

    async def _private(self, interaction: discord.Interaction, reply: Reply,
                       view: discord.ui.View | None = None) -> None:
        rendered = render_reply(reply, page_chars=self.config.page_chars, file_limit=interaction.filesize_limit)
        if view is None and len(rendered.pages) > 1:
            view = Pager(rendered.pages)
        first, *more = batches(rendered.files) or [[]]
        embed = rendered.pages[0].embed()
        if not interaction.response.is_done():
            if view is None:
                await interaction.response.send_message(embed=embed, files=discord_files(first), ephemeral=True)
            else:
                await interaction.response.send_message(embed=embed, files=discord_files(first), view=view,
                                                        ephemeral=True)
        else:
            await interaction.edit_original_response(content=None, embed=embed, attachments=discord_files(first),
                                                     view=view)
        for batch in more:
            await interaction.followup.send(files=discord_files(batch), ephemeral=True)

    async def _public(self, interaction: discord.Interaction, rendered: Rendered,
                      note: str = "Done: the answer is posted in the channel.") -> None:
        """Post publicly; a deferred (private) answer first becomes a short note to the asker."""
        pager = Pager(rendered.pages) if len(rendered.pages) > 1 else None
        first, *more = batches(rendered.files) or [[]]
        embed = rendered.pages[0].embed()
        if not interaction.response.is_done():
            if pager is None:
                await interaction.response.send_message(embed=embed, files=discord_files(first))
            else:
                await interaction.response.send_message(embed=embed, files=discord_files(first), view=pager)
        else:
            await interaction.edit_original_response(content=note, embed=None, attachments=[], view=None)
            if pager is None:
                await interaction.followup.send(embed=embed, files=discord_files(first), wait=True)
            else:
                await interaction.followup.send(embed=embed, files=discord_files(first), view=pager, wait=True)
        for batch in more:
            await interaction.followup.send(files=discord_files(batch), wait=True)

    async def _submission(self, interaction: discord.Interaction, reply: Reply, submission_id: int) -> None:
        header, embed = accepted_embed(submission_id, reply)
        note = f"Submission #{submission_id} accepted: live progress below, details in a thread when it ends."
        if interaction.response.is_done():
            await interaction.edit_original_response(content=note, embed=None, attachments=[], view=None)
            message: discord.Message = await interaction.followup.send(embed=embed, wait=True)
            original = False
        else:
            await interaction.response.send_message(embed=embed)
            message = await interaction.original_response()
            original = True
        origin = Origin(interaction.guild_id, message.channel.id, message.id)
        live = LiveMessage(self.client, interaction, message_id=message.id, channel_id=message.channel.id,
                           original=original, owner_id=interaction.user.id, clock=self.clock,
                           token_margin_s=self.config.token_margin_s, on_moved=self._moved(submission_id, origin))
        self._start_following(live, submission_id, header, origin)

    async def resume(self) -> int:
        """Follow again each submission asked here whose report is still owed (the bot stopped
        while it ran, or before delivering it); called whenever the client is ready."""
        owed = await owed_here(self._app().engine, PREFIX, Origin.parse, self.followed)
        for entry, origin in owed:
            live = LiveMessage(self.client, None, message_id=origin.message_id, channel_id=origin.channel_id,
                               original=False, owner_id=user_id_of(entry.submitter), clock=self.clock,
                               token_margin_s=self.config.token_margin_s,
                               on_moved=self._moved(entry.submission_id, origin))
            self._start_following(live, entry.submission_id, None, None)
        return len(owed)

    def _moved(self, submission_id: int, origin: Origin) -> Callable[[int], Coroutine[Any, Any, None]]:
        """Keep the core's ``reply_to`` on the message actually shown, for the next restart."""
        async def moved(message_id: int) -> None:
            await self._remember(submission_id, origin.at(message_id))

        return moved

    async def _remember(self, submission_id: int, origin: Origin) -> None:
        await remember_reply_to(self._app().engine, submission_id, origin.reply_to)

    def _start_following(self, live: LiveMessage, submission_id: int, header: str | None,
                         origin: Origin | None) -> None:
        """``header`` None: followed again, the header is rebuilt from the report. ``origin``:
        where the message was just posted, for the core to remember first."""
        task = asyncio.create_task(self._follow(live, submission_id, header, origin))
        self.following.add(task)
        self.followed.add(submission_id)
        task.add_done_callback(self.following.discard)
        task.add_done_callback(lambda _: self.followed.discard(submission_id))

    async def _follow(self, live: LiveMessage, submission_id: int, header: str | None,
                      origin: Origin | None) -> None:
        assert self.follower is not None
        try:
            if origin is not None:
                await self._remember(submission_id, origin)
            if header is None:
                await self.follower.resume(live, submission_id)
            else:
                await self.follower.follow(live, submission_id, header)
        except discord.HTTPException as error:  # Discord said no for good: the channel is gone, ...
            log.warning("could not deliver a submission on Discord", submission_id=submission_id,
                        status=error.status, code=error.code, error=error.text)
        except Exception:
            log.exception("following a submission on Discord failed", submission_id=submission_id,
                          message_id=live.message_id)
