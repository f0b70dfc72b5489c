"""Running a pull request's submissions through the core, answering on the pull request: one
check run per file on the head commit, and one comment per file and mode, edited in place from
"queued" to the report. A restart follows the unfinished ones again (their ``reply_to``)."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog

from kernelcup.adapters.background import Spawn
from kernelcup.adapters.github.api import GitHubApi, GitHubApiError, Output
from kernelcup.adapters.github.live import LiveReply, marker
from kernelcup.adapters.github.markdown import progress, render, summary
from kernelcup.adapters.github.origin import PREFIX, Origin
from kernelcup.adapters.github.pulls import ChangedFiles, PullRequest, SubmissionPath, changed_files
from kernelcup.adapters.github.settings import GitHubSettings
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Attachment, Block, Reply, Request, Text
from kernelcup.core.pipeline.delivery import RESUMED_NOTE, claim_report, owed_here
from kernelcup.core.pipeline.events import JobEvent

log = structlog.get_logger("kernelcup.github")


class Conversation:
    def __init__(self, app: Kernelcup, api: GitHubApi, github: GitHubSettings) -> None:
        self.app = app
        self.api = api
        self.github = github
        self.followed: set[int] = set()  # submissions followed here, so none is followed twice

    async def submissions(self, pr: PullRequest) -> ChangedFiles:
        return changed_files(await self.api.pull_files(pr.repo, pr.number), self.github.folder)

    async def run_pull(self, pr: PullRequest, *, mode: str, gpus: list[str], only: str | None = None) -> None:
        """Submit each submission file of the pull request (or the one ``only`` names)."""
        changed = await self.submissions(pr)
        chosen = [s for s in changed.submissions if only is None or only in (s.path, s.name)]
        if not chosen:
            await self.nothing_to_run(pr, changed, only)
            return
        await asyncio.gather(*(self.submit(pr, s, mode, gpus) for s in chosen))

    def layout_hint(self) -> str:
        return f"kernelcup runs files laid out as `{self.github.folder}/<leaderboard>/<name>.py` (or `.cu`)."

    async def nothing_to_run(self, pr: PullRequest, changed: ChangedFiles, only: str | None = None) -> None:
        """A neutral check run; a comment too when files under the folder are not laid out as
        submissions (or a command named a file the pull request does not change)."""
        said = f"No submission named `{only}` in this pull request." if only else "No submission in this pull request."
        text = f"{said} {self.layout_hint()}"
        if changed.others:
            text += "\n\nNot submissions:\n" + "\n".join(f"- `{path}`" for path in changed.others)
        await self.api.create_check(pr.repo, pr.head_sha, self.github.check_name, Output("No submission", text),
                                    conclusion="neutral")
        if changed.others or only:
            await self.upsert_comment(pr, "layout", marker("layout") + "\n" + text)

    async def await_approval(self, pr: PullRequest) -> None:
        """A fork's pull request: nothing runs until an approver says so."""
        changed = await self.submissions(pr)
        if not changed.submissions:
            await self.nothing_to_run(pr, changed)
            return
        text = (f"This pull request comes from a fork ({pr.head_repo}): its files run, in test mode only, after "
                f"a maintainer reviews them and comments `/kernelcup approve`.")
        for sub in changed.submissions:
            await self.api.create_check(pr.repo, pr.head_sha, self.check_name(sub, "test"),
                                        Output("Waiting for a maintainer's approval", text),
                                        conclusion="action_required", details_url=pr.html_url or None)
        await self.upsert_comment(pr, "approval", marker("approval") + "\n" + text)

    def check_name(self, sub: SubmissionPath, mode: str) -> str:
        return f"{self.github.check_name}: {sub.path}" + ("" if mode == "test" else f" ({mode})")

    async def submit(self, pr: PullRequest, sub: SubmissionPath, mode: str, gpus: list[str]) -> None:
        """One file: a check run and a comment first (their ids are the submission's
        ``reply_to``), then the core's answer, followed to the report."""
        key = f"{sub.path}:{mode}"
        check_id = await self.api.create_check(
            pr.repo, pr.head_sha, self.check_name(sub, mode),
            Output(f"Submitting {sub.name}", f"`{sub.path}` at {pr.head_sha[:7]}, {mode} mode"))
        first = [Text(f"Submitting `{sub.path}` at {pr.head_sha[:7]} ({mode})…", style="hint")]
        comment_id = await self.upsert_comment(pr, key, marker(key) + "\n" + render(first))
        origin = Origin(pr.repo, pr.number, check_id, comment_id, key)
        try:
            content = await self.api.content(pr.head_repo, sub.path, pr.head_sha)
        except GitHubApiError as exc:
            log.warning("could not read a submission", path=sub.path, error=str(exc))
            await self.refused(origin, Reply.error(f"Could not read {sub.path} at {pr.head_sha[:7]}.",
                                                        "Push again, or ask a maintainer to look at the log."))
            return
        args: dict[str, Any] = {"mode": mode, "leaderboard": sub.leaderboard, "gpu": gpus or None}
        request = Request(pr.author_actor, "submit", args, [Attachment(sub.name, content)],
                          reply_to=origin.reply_to)
        reply = await self.app.handle(request)
        fallback = [g for g in self.github.gpus if g in ((reply.choices or {}).get("gpu") or [])]
        if fallback and not gpus:  # several GPUs fit and the file names none: the configured ones
            request.args = {**args, "gpu": fallback}
            reply = await self.app.handle(request)
        if reply.submission_id is None:
            await self.refused(origin, reply, "action_required" if reply.choices else "failure",
                               pr.html_url)
            return
        where = Text(f"`{sub.path}` at {pr.head_sha[:7]}", style="hint")
        await self.follow(origin, reply.submission_id, reply.blocks, heading=[where])

    async def refused(self, origin: Origin, reply: Reply, conclusion: str = "failure",
                      details_url: str | None = None) -> None:
        lines = [b for b in reply.blocks if isinstance(b, Text)]
        title = lines[0].text if lines else "Refused"
        body = render(reply.blocks, max_log_chars=self.github.max_log_chars)
        try:
            await self.api.update_check(origin.repo, origin.check_id, Output(title[:250], body),
                                        conclusion=conclusion)
            await self.api.update_comment(origin.repo, origin.comment_id, marker(origin.key) + "\n" + body)
        except GitHubApiError as exc:
            log.warning("could not say why a submission was refused", error=str(exc), status=exc.status)

    async def follow(self, origin: Origin, submission_id: int, intro: list[Block],
                     heading: list[Block] | None = None) -> None:
        """Progress until every job has ended, then the report, if this process claims it;
        ``heading`` (which file at which commit) tops the comment throughout."""
        heading = heading or []
        self.followed.add(submission_id)
        live = LiveReply(self.api, origin, self.github.update_interval_s, self.github.max_log_chars)
        try:
            events: dict[int, JobEvent] = {}
            async for event in self.app.follow(submission_id):
                events[event.job_id] = event
                live.show(heading + progress(intro, events))
            if not await asyncio.to_thread(claim_report, self.app.engine, submission_id, self.app.now()):
                log.info("submission delivered by another process", submission_id=submission_id)
                return
            report = await self.app.submission_report(submission_id)
            title, text, tables = summary(report)
            await live.finish(Output(title, text, tables), "success" if report.ok else "failure",
                              heading + report.blocks)
        finally:
            await live.close()
            self.followed.discard(submission_id)

    async def resume(self, spawn: Spawn) -> int:
        """Follow again, each in a task of its own, the submissions asked here whose report is
        still owed (the bot stopped while they ran); how many."""
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
            await self.follow(origin, submission_id, intro)
        finally:
            self.followed.discard(submission_id)

    async def upsert_comment(self, pr: PullRequest, key: str, body: str) -> int:
        """This key's comment edited, or a new one: one comment per file and mode, not one per push."""
        for comment in await self.api.comments(pr.repo, pr.number):
            if str(comment.get("body") or "").startswith(marker(key)):
                try:
                    await self.api.update_comment(pr.repo, int(comment["id"]), body)
                    return int(comment["id"])
                except GitHubApiError:  # someone else's comment that copied the marker
                    continue
        return await self.api.create_comment(pr.repo, pr.number, body)

    async def answer(self, pr: PullRequest, body: str) -> None:
        await self.api.create_comment(pr.repo, pr.number, body)
