"""Answering one request in Slack: run it through the core, then reply where it came from.

Errors and private replies are ephemeral; a submission becomes a message that is edited live
and ends with the report, its logs and timings as files in the message's thread. When the bot
cannot write to the channel (not invited), the answer goes to the user's DM with the bot.

The message's place is kept in the core as the submission's ``reply_to`` (``origin.py``): when
the adapter connects after a restart, it follows again each submission whose report it owes.
"""

from __future__ import annotations

import asyncio
import secrets
import time
import uuid
from dataclasses import dataclass, field

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from kernelcup.adapters.background import Spawn
from kernelcup.adapters.slack.blocks import SlackMessage, context, gpu_choice_message, progress_blocks, render
from kernelcup.adapters.slack.files import upload
from kernelcup.adapters.slack.live import LiveMessage, Moved, StillOwed
from kernelcup.adapters.slack.origin import PREFIX, Origin
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Block, Reply, Request, Text
from kernelcup.core.pipeline.delivery import RESUMED_NOTE, claim_report, owed_here, remember_reply_to, report_delivered
from kernelcup.core.pipeline.events import JobEvent

log = structlog.get_logger("kernelcup.slack")
NO_ACCESS = {"not_in_channel", "channel_not_found", "is_archived", "restricted_action", "cannot_dm_bot"}
CHOICE_TTL_S = 15 * 60


@dataclass(frozen=True)
class Destination:
    """Where a request came from: the channel to answer in, and the requester."""

    channel: str
    user: str
    team: str
    response_url: str | None = None  # slash commands and buttons: ephemeral replies go here

    @property
    def reply_to(self) -> str:
        return Origin(self.team, self.channel).reply_to


@dataclass
class PendingChoice:
    request: Request
    destination: Destination
    expires_at: float = field(default_factory=lambda: time.monotonic() + CHOICE_TTL_S)


class Conversation:
    def __init__(self, app: Kernelcup, client: AsyncWebClient, *, update_interval_s: float) -> None:
        self.app = app
        self.client = client
        self.update_interval_s = update_interval_s
        self.max_chars = app.settings.limits.max_reply_chars
        self._choices: dict[str, PendingChoice] = {}
        self.followed: set[int] = set()  # submissions followed here, so none is followed twice

    async def run(self, request: Request, destination: Destination) -> None:
        """The whole answer to one request; never raises (the bot keeps serving)."""
        try:
            request.reply_to = destination.reply_to
            request.pictures = True  # charts go into the message's thread as files
            reply = await self.app.handle(request)
            if reply.choices and "gpu" in reply.choices:
                await self.offer_gpus(request, destination, reply, reply.choices["gpu"])
            elif reply.submission_id is not None:
                await self.follow(reply, destination)
            elif reply.ephemeral or not reply.ok:
                await self.ephemeral(destination, self.render(reply))
            else:
                await self.publish(destination, self.render(reply))
        except SlackApiError as exc:
            log.warning("Slack refused a reply", error=exc.response.get("error"), command=request.command,
                        channel=destination.channel)
        except Exception:
            incident = uuid.uuid4().hex[:8]
            log.exception("Slack reply failed", command=request.command, channel=destination.channel,
                          incident=incident)
            await self.apologize(destination, incident)

    async def apologize(self, destination: Destination, incident: str) -> None:
        reply = Reply.error(f"Something went wrong on our side (incident {incident}).",
                            "A submission that was accepted still runs; an admin can look the incident up in the log.")
        try:
            await self.ephemeral(destination, self.render(reply))
        except Exception:
            log.exception("could not tell the user about the incident", incident=incident)

    def render(self, reply: Reply) -> SlackMessage:
        return render(reply, max_chars=self.max_chars)

    async def publish(self, destination: Destination, message: SlackMessage) -> tuple[str, str]:
        channel, ts = await self.post(destination, message)
        await upload(self.client, channel, ts, message.files)
        return channel, ts

    async def post(self, destination: Destination, message: SlackMessage) -> tuple[str, str]:
        """chat.postMessage in the channel, or in the user's DM when the bot is not in it."""
        try:
            response = await self.client.chat_postMessage(
                channel=destination.channel, text=message.text, blocks=message.blocks
            )
        except SlackApiError as exc:
            if exc.response.get("error") not in NO_ACCESS:
                raise
            response = await self.client.chat_postMessage(
                channel=await self.dm_channel(destination.user), text=message.text,
                blocks=[*message.blocks, context("I am not in that channel, so I answer here. Invite me there "
                                                 "to answer in the channel.")],
            )
        return str(response["channel"]), str(response["ts"])

    async def dm_channel(self, user: str) -> str:
        response = await self.client.conversations_open(users=user)
        return str(response["channel"]["id"])

    async def ephemeral(self, destination: Destination, message: SlackMessage) -> None:
        """Seen only by the requester: through the response URL, else chat.postEphemeral, else DM."""
        sent = False
        if destination.response_url:
            webhook = AsyncWebhookClient(destination.response_url)
            response = await webhook.send(text=message.text, blocks=message.blocks, response_type="ephemeral",
                                          replace_original=False)
            sent = response.status_code == 200
            if not sent:
                log.info("response_url refused; using chat.postEphemeral", status=response.status_code)
        if not sent:
            try:
                await self.client.chat_postEphemeral(
                    channel=destination.channel, user=destination.user, text=message.text, blocks=message.blocks
                )
            except SlackApiError as exc:
                if exc.response.get("error") not in NO_ACCESS:
                    raise
                await self.client.chat_postMessage(channel=await self.dm_channel(destination.user),
                                                   text=message.text, blocks=message.blocks)
        if message.files:  # an ephemeral message has no thread: its files go to the DM
            await upload(self.client, await self.dm_channel(destination.user), None, message.files)

    async def follow(self, reply: Reply, destination: Destination) -> None:
        submission_id = reply.submission_id
        assert submission_id is not None
        self.followed.add(submission_id)
        try:
            channel, ts = await self.post(destination, self.render(reply))
            origin = Origin(destination.team, channel, ts)
            await self._remember(submission_id, origin)
            still_owed, moved = self._hooks(submission_id, origin)
            live = LiveMessage(self.client, channel, ts, self.update_interval_s, still_owed=still_owed,
                               on_moved=moved)
            await self._follow_to_end(live, submission_id, reply.blocks)
        finally:
            self.followed.discard(submission_id)

    async def resume(self, spawn: Spawn) -> int:
        """Follow again, each in a task of its own, the submissions asked here whose report is
        still owed (the bot stopped while they ran, or before delivering it); how many."""
        owed = await owed_here(self.app.engine, PREFIX, Origin.parse, self.followed)
        for entry, origin in owed:
            self.followed.add(entry.submission_id)
            spawn(self._resume(entry.submission_id, origin))
        return len(owed)

    async def _resume(self, submission_id: int, origin: Origin) -> None:
        try:
            report = await self.app.submission_report(submission_id)
            intro: list[Block] = [b for b in report.blocks if isinstance(b, Text) and b.style == "title"]
            intro.append(Text(RESUMED_NOTE, style="hint"))
            still_owed, moved = self._hooks(submission_id, origin)
            if origin.ts is None:  # the bot stopped before posting it
                first = progress_blocks(submission_id, intro, {})
                live = await LiveMessage.post(self.client, origin.channel, first, self.update_interval_s,
                                              still_owed=still_owed, on_moved=moved)
                await self._remember(submission_id, origin.at(live.channel, live.ts))
            else:
                live = LiveMessage(self.client, origin.channel, origin.ts, self.update_interval_s,
                                   still_owed=still_owed, on_moved=moved)
            await self._follow_to_end(live, submission_id, intro)
        finally:
            self.followed.discard(submission_id)

    async def _follow_to_end(self, live: LiveMessage, submission_id: int, intro: list[Block]) -> None:
        """Progress until every job has ended, then the report, if it is ours to deliver: of
        several processes following one submission, the one that claims it shows it."""
        events: dict[int, JobEvent] = {}
        try:
            async for event in self.app.follow(submission_id):
                events[event.job_id] = event
                live.show(progress_blocks(submission_id, intro, events))
            if not await asyncio.to_thread(claim_report, self.app.engine, submission_id, self.app.now()):
                log.info("submission delivered by another process", submission_id=submission_id)
                return
            report = await self.app.submission_report(submission_id, pictures=True)
            final = render(report, max_chars=self.max_chars, tables_as_files=True,
                           file_prefix=f"submission-{submission_id}-")
            if final.files:
                final.blocks.append(context("Logs and per-case timings are in the thread."))
            await live.finish(final)
        finally:
            await live.close()
        await upload(self.client, live.channel, live.ts, final.files)

    def _hooks(self, submission_id: int, origin: Origin) -> tuple[StillOwed, Moved]:
        """The live message's hooks: progress only while the report is owed, and the core told
        where a replacement message went, for the next restart."""
        async def still_owed() -> bool:
            return not await asyncio.to_thread(report_delivered, self.app.engine, submission_id)

        async def moved(channel: str, ts: str) -> None:
            await self._remember(submission_id, origin.at(channel, ts))

        return still_owed, moved

    async def _remember(self, submission_id: int, origin: Origin) -> None:
        await remember_reply_to(self.app.engine, submission_id, origin.reply_to)

    async def offer_gpus(self, request: Request, destination: Destination, reply: Reply, gpus: list[str]) -> None:
        now = time.monotonic()
        self._choices = {k: v for k, v in self._choices.items() if v.expires_at > now}
        token = secrets.token_urlsafe(12)
        self._choices[token] = PendingChoice(request, destination)
        await self.ephemeral(destination, gpu_choice_message(reply, gpus, token))

    async def choose_gpus(self, token: str, gpus: list[str], user: str, response_url: str | None) -> None:
        """The GPU menu's button: re-send the request that asked, with the chosen GPUs."""
        pending = self._choices.get(token)
        answer = AsyncWebhookClient(response_url) if response_url else None
        if pending is None or pending.expires_at <= time.monotonic() or pending.destination.user != user:
            self._choices.pop(token, None)
            if answer is not None:
                await answer.send(text="This choice has expired; please submit again.", response_type="ephemeral",
                                  replace_original=True)
            return
        if not gpus:
            if answer is not None:
                await answer.send(text="Pick at least one GPU first.", response_type="ephemeral",
                                  replace_original=False)
            return
        del self._choices[token]
        if answer is not None:
            await answer.send(text=f"Submitting on {', '.join(gpus)}.", response_type="ephemeral",
                              replace_original=True)
        pending.request.args["gpu"] = gpus
        await self.run(pending.request, pending.destination)
