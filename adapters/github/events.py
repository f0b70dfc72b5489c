"""GitHub's webhook events as core requests: a pull request opened or pushed to, and
``/kernelcup ...`` comments on one. Who may run what on a pull request is decided here;
what a user may do at all stays with the core (roles, rate limits, the fair queue)."""

from __future__ import annotations

import re
from typing import Any

import structlog

from kernelcup.adapters.github.conversation import Conversation
from kernelcup.adapters.github.markdown import render
from kernelcup.adapters.github.pulls import PullRequest, actor
from kernelcup.adapters.github.settings import GitHubSettings
from kernelcup.core.access.permissions import allows, role_of
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import find_command
from kernelcup.core.commands.parsing import parse_line
from kernelcup.core.commands.registry import Kind
from kernelcup.core.errors import UserError
from kernelcup.core.messages import Actor, Block, Reply, Request, Text
from kernelcup.core.roles import Role

log = structlog.get_logger("kernelcup.github")
PREFIX = "/kernelcup"
APPROVE = "approve"
PRIVATE_COMMANDS = ("token",)  # its answer is a secret: never run where the answer would be public
RUN_ACTIONS = ("opened", "synchronize", "reopened")
_LINE = re.compile(rf"^\s*{re.escape(PREFIX)}(?:\s+(?P<rest>.*))?$", re.MULTILINE)


def command_line(body: str) -> str | None:
    """The first ``/kernelcup ...`` line of a comment, without the prefix ("" for help)."""
    match = _LINE.search(body)
    return None if match is None else (match["rest"] or "").strip()


class Events:
    def __init__(self, app: Kernelcup, conversation: Conversation, github: GitHubSettings) -> None:
        self.app = app
        self.conversation = conversation
        self.api = conversation.api
        self.github = github

    async def dispatch(self, event: str, payload: dict[str, Any]) -> None:
        if event == "pull_request":
            await self.pull_request(payload)
        elif event == "issue_comment":
            await self.issue_comment(payload)

    async def pull_request(self, payload: dict[str, Any]) -> None:
        if payload.get("action") not in RUN_ACTIONS:
            return
        pr = PullRequest.from_payload(payload["pull_request"])
        if pr.from_fork and self.github.fork_approval:
            await self.conversation.await_approval(pr)
            return
        await self.conversation.run_pull(pr, mode="test", gpus=[])

    async def issue_comment(self, payload: dict[str, Any]) -> None:
        issue, comment = payload.get("issue") or {}, payload.get("comment") or {}
        if payload.get("action") != "created" or not issue.get("pull_request"):
            return  # an edit, or a comment on an issue rather than a pull request
        user = comment.get("user") or {}
        if user.get("type") == "Bot":
            return  # our own comments (and other bots') are never commands
        line = command_line(str(comment.get("body") or ""))
        if line is None:
            return
        repo = str((payload.get("repository") or {}).get("full_name") or "")
        pr = PullRequest.from_payload(await self.api.pull(repo, int(issue["number"])))
        commenter = actor(str(user.get("login") or ""), str(comment.get("author_association") or ""))
        await self.command(pr, commenter, line)

    def approver(self, who: Actor) -> bool:
        """A maintainer: an author association config names, or kernelcup's creator or admin role."""
        associations = {r.split(":", 1)[1] for r in who.platform_roles if r.startswith("github-association:")}
        return bool(associations & set(self.github.approvers)) or allows(role_of(who, self.app.settings),
                                                                          Role.CREATOR)

    async def command(self, pr: PullRequest, commenter: Actor, line: str) -> None:
        if line.split()[:1] == [APPROVE]:
            await self.approve(pr, commenter, line)
            return
        try:
            name, args = parse_line(line)
        except UserError as exc:
            await self.reply(pr, commenter, line, Reply.error(exc.message, exc.hint).blocks)
            return
        if name == "submit":
            await self.submit(pr, commenter, line, args)
            return
        cmd = find_command(name)
        if name in PRIVATE_COMMANDS:
            await self.reply(pr, commenter, line, Reply.error(
                f"{name} answers only you, and a comment is public.", "Ask it on the web pages or in a chat.").blocks)
            return
        if any(p.kind in (Kind.FILE, Kind.FOLDER) and p.required for p in cmd.params):
            await self.reply(pr, commenter, line, Reply.error(
                f"{name} takes files, which a comment cannot carry.", "Use the terminal or the web API.").blocks)
            return
        board = next((p.name for p in cmd.params if p.kind is Kind.LEADERBOARD), None)
        if board is not None and not args.get(board):  # the pull request's leaderboard
            changed = await self.conversation.submissions(pr)
            if changed.submissions:
                args[board] = changed.submissions[0].leaderboard
        reply = await self.app.handle(Request(commenter, name, args))
        if reply.ok and reply.ephemeral:  # for the asker's eyes only: a comment is public
            reply = Reply([Text(f"The answer to `{name}` is only for you, and a comment is public: ask it on the "
                                f"web pages or in the terminal.", style="hint")])
        await self.reply(pr, commenter, line, reply.blocks)

    async def submit(self, pr: PullRequest, commenter: Actor, line: str, args: dict[str, Any]) -> None:
        mode = str(args.get("mode") or "test")
        if mode == "leaderboard":
            mode = "ranked"
        refusal = self.refusal(pr, commenter, mode)
        if refusal is not None:
            await self.reply(pr, commenter, line, Reply.error(*refusal).blocks)
            return
        only = args.get("file")
        await self.conversation.run_pull(pr, mode=mode, gpus=list(args.get("gpu") or []),
                                         only=str(only) if only else None)

    def refusal(self, pr: PullRequest, commenter: Actor, mode: str) -> tuple[str, str] | None:
        """Why ``commenter`` may not run the pull request's files in ``mode``, or None."""
        maintainer = self.approver(commenter)
        if pr.from_fork and mode != "test":
            return ("A pull request from a fork runs only in test mode.",
                    "Submit ranked from the terminal, the web or a chat, or from a branch of this repository.")
        if pr.from_fork and self.github.fork_approval and not maintainer:
            return ("A pull request from a fork runs after a maintainer's approval.",
                    "A maintainer reviews the files and comments `/kernelcup approve`.")
        if commenter.display_name != pr.author and not maintainer:
            return (f"Only @{pr.author}, who opened this pull request, or a maintainer may submit its files.", "")
        return None

    async def approve(self, pr: PullRequest, commenter: Actor, line: str) -> None:
        if not self.approver(commenter):
            await self.reply(pr, commenter, line, Reply.error(
                "Only a maintainer may approve a run.",
                f"Maintainers: {', '.join(self.github.approvers)} of this repository, and kernelcup's "
                f"creators and admins.").blocks)
            return
        log.info("run approved", repo=pr.repo, number=pr.number, sha=pr.head_sha, by=commenter.identity)
        await self.conversation.run_pull(pr, mode="test", gpus=[])

    async def reply(self, pr: PullRequest, commenter: Actor, line: str, blocks: list[Block]) -> None:
        answer = render(blocks, max_log_chars=self.github.max_log_chars)
        body = f"@{commenter.display_name}\n> `{PREFIX} {line}`\n\n{answer}"
        await self.conversation.answer(pr, body)
