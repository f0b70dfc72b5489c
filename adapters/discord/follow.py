"""Following one submission on Discord: live progress in its message, then the result embed,
then the details (benchmark tables, logs, profiles) in a thread of their own.

Several processes may follow one submission (a restarted one picks up what the others follow
live): the report is claimed in the core before it is shown, the others stop there, and a
progress edit is sent only while the report is still owed, so none can cover the report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

import discord
import structlog

from kernelcup.adapters.discord.live import CONNECTION_ERRORS, LiveMessage, ThrottledEdits
from kernelcup.adapters.discord.render import (
    BLURPLE,
    GREEN,
    RED,
    TITLE_CHARS,
    detail_messages,
    discord_files,
    inline,
    progress_line,
)
from kernelcup.core.messages import Block, ProgressBlock, Reply, Text
from kernelcup.core.pipeline.delivery import RESUMED_NOTE, claim_report, report_delivered
from kernelcup.core.pipeline.events import JobEvent

if TYPE_CHECKING:
    from kernelcup.core.app import Kernelcup

log = structlog.get_logger("kernelcup.discord")

DESCRIPTION_CHARS = 4000  # an embed holds 4096
FINAL_EDIT_RETRIES_S = (1.0, 4.0)  # waits before the result's edit is tried again (``edit_final``)
THREAD_ARCHIVE_MINUTES: Literal[10080] = 10080  # a week: people come back to their logs


def job_line(event: JobEvent) -> str:
    if event.finished:
        status = (event.status or event.phase).replace("_", " ")
        icon = "✅" if event.status == "succeeded" else "❌"
        return f"{icon} `{event.gpu}` {status}" + (f": {event.error}" if event.error else "")
    return progress_line(event.gpu, event.phase, event.done, event.total, event.queue_position)


def progress_embed(submission_id: int, header: str, jobs: Iterable[JobEvent]) -> discord.Embed:
    lines = [header, "", *(job_line(event) for event in jobs)]
    return discord.Embed(title=f"Submission #{submission_id}", description="\n".join(lines).strip(),
                         colour=BLURPLE)


def final_embed(submission_id: int, report: Reply, details: str) -> discord.Embed:
    """Verdict and score per GPU, with rank; whole lines only, the thread has everything."""
    title = f"Submission #{submission_id}"
    lines: list[str] = []
    for block in report.blocks:
        if not isinstance(block, Text):
            continue
        if block.style == "title" and len(block.text) <= TITLE_CHARS and title.startswith("Submission #"):
            title = block.text
        else:
            lines.append(inline(block))
    description = ""
    for line in lines:
        if len(description) + len(line) + 1 > DESCRIPTION_CHARS:
            description += "\n…more lines in the details."
            break
        description = f"{description}\n{line}" if description else line
    embed = discord.Embed(title=title, description=description or None, colour=GREEN if report.ok else RED)
    embed.add_field(name="Details", value=details, inline=False)
    return embed


class SubmissionFollower:
    def __init__(self, app: Kernelcup, client: discord.Client, *, private_threads: bool,
                 edit_interval_s: float) -> None:
        self.app = app
        self.client = client
        self.private_threads = private_threads
        self.edit_interval_s = edit_interval_s

    async def follow(self, live: LiveMessage, submission_id: int, header: str) -> None:
        jobs: dict[int, JobEvent] = {}

        async def show_progress(embed: discord.Embed) -> None:
            if not await asyncio.to_thread(report_delivered, self.app.engine, submission_id):
                await live.edit(embed)

        edits = ThrottledEdits(show_progress, self.edit_interval_s)
        async for event in self.app.follow(submission_id):
            jobs[event.job_id] = event
            edits.show(progress_embed(submission_id, header, jobs.values()))
        await edits.settle()  # our progress goes out before the claim, anyone's is held back after it
        if not await asyncio.to_thread(claim_report, self.app.engine, submission_id, self.app.now()):
            log.info("submission delivered by another process", submission_id=submission_id)
            return
        if live.message_id is None:  # never posted (the bot stopped first): the details need it
            await live.edit(progress_embed(submission_id, header, jobs.values()))
        report = await self.app.submission_report(submission_id, pictures=True)
        where = await self._post_details(live, submission_id, [b for b in report.blocks if not _is_title(b)])
        await edit_final(live, final_embed(submission_id, report, where), submission_id)
        log.info("submission delivered", submission_id=submission_id, message_id=live.message_id,
                 progress_edits=edits.edits)

    async def resume(self, live: LiveMessage, submission_id: int) -> None:
        """Follow a submission again after a restart, in the message that showed it before."""
        report = await self.app.submission_report(submission_id)
        title = next((b.text for b in report.blocks if isinstance(b, Text) and b.style == "title"),
                     f"Submission #{submission_id}")
        await self.follow(live, submission_id, f"{title}\n*{RESUMED_NOTE}*")

    async def _post_details(self, live: LiveMessage, submission_id: int, blocks: list[Block]) -> str:
        """Post the details where they belong; returns how the result embed points to them."""
        assert live.message_id is not None, "the details follow a posted message"
        messages = detail_messages(blocks, file_limit=live.file_limit,
                                   file_prefix=f"submission-{submission_id}")
        thread = await self._open_thread(live, submission_id)
        target: discord.abc.Messageable = thread or self.client.get_partial_messageable(live.channel_id)
        reference = None if thread else discord.MessageReference(
            message_id=live.message_id, channel_id=live.channel_id, fail_if_not_exists=False)
        posted = 0
        for message in messages:
            try:
                if posted == 0 and reference is not None:
                    await target.send(content=message.content or None, files=discord_files(message.files),
                                      reference=reference)
                else:
                    await target.send(content=message.content or None, files=discord_files(message.files))
                posted += 1
            except discord.HTTPException as error:
                log.warning("details message failed", submission_id=submission_id, status=error.status,
                            code=error.code)
        if thread is not None:
            return f"In the thread {thread.mention}."
        return "In the replies below." if posted else f"Not posted here; `get-submission {submission_id}` shows them."

    async def _open_thread(self, live: LiveMessage, submission_id: int) -> discord.Thread | None:
        assert live.message_id is not None
        channel = self.client.get_channel(live.channel_id)
        if isinstance(channel, discord.Thread):
            return channel  # asked inside a thread: the details stay there
        if not isinstance(channel, discord.TextChannel):
            return None
        name = f"Submission #{submission_id}"
        if self.private_threads and live.owner_id is not None:
            try:
                thread = await channel.create_thread(name=name, type=discord.ChannelType.private_thread,
                                                     invitable=False, auto_archive_duration=THREAD_ARCHIVE_MINUTES)
                await thread.add_user(discord.Object(live.owner_id))
                return thread
            except discord.HTTPException as error:
                log.info("no private thread here; trying a public one", status=error.status, code=error.code)
        try:
            return await channel.create_thread(name=name, message=discord.Object(live.message_id),
                                               auto_archive_duration=THREAD_ARCHIVE_MINUTES)
        except discord.HTTPException as error:
            log.warning("no thread for the details", submission_id=submission_id, status=error.status,
                        code=error.code)
            return None


async def edit_final(live: LiveMessage, embed: discord.Embed, submission_id: int,
                     delays_s: tuple[float, ...] = FINAL_EDIT_RETRIES_S) -> None:
    """Show the result. The report is claimed by now, so no other process will show it: where
    the connection breaks (``CONNECTION_ERRORS``), the edit is tried again after each of
    ``delays_s``."""
    for delay in (*delays_s, None):
        try:
            await live.edit(embed)
            return
        except CONNECTION_ERRORS as error:
            if delay is None:
                raise
            log.warning("result edit failed; trying again", submission_id=submission_id, error=repr(error),
                        in_s=delay)
            await asyncio.sleep(delay)


def _is_title(block: Block) -> bool:
    return isinstance(block, Text) and block.style == "title"


def accepted_embed(submission_id: int, reply: Reply) -> tuple[str, discord.Embed]:
    """The first state of a submission's public message, from the core's acceptance reply."""
    header = next((b.text for b in reply.blocks if isinstance(b, Text)), f"Submission #{submission_id}")
    lines = [header, ""] + [inline(b) for b in reply.blocks if isinstance(b, ProgressBlock)]
    embed = discord.Embed(title=f"Submission #{submission_id}", description="\n".join(lines).strip(), colour=BLURPLE)
    return header, embed
