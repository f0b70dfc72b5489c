"""A local GitHub REST API: pull requests with their files and contents at a commit, check runs
and issue comments. It answers the real httpx client as GitHub does (JSON, 404 for what it does
not hold) and records every call, so a test reads what the adapter did on the pull request."""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

TOKEN = "ghs_test_token"
BOT_LOGIN = "kernelcup[bot]"


@dataclass
class Call:
    method: str
    path: str
    body: Any


@dataclass
class CheckRun:
    id: int
    name: str
    head_sha: str
    status: str
    conclusion: str | None
    output: dict[str, Any]
    details_url: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)  # every state it was given


@dataclass
class Comment:
    id: int
    number: int
    body: str
    login: str = BOT_LOGIN
    edits: list[str] = field(default_factory=list)  # every body it had


class FakeGitHub:
    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.files: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.contents: dict[tuple[str, str, str], bytes] = {}  # (repo, sha, path) -> bytes
        self.check_runs: dict[int, CheckRun] = {}
        self.comments: dict[int, Comment] = {}
        self.tokens: set[str | None] = set()
        self._ids = itertools.count(101)
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # -- what a test sets up -------------------------------------------------------------------

    def open_pull(self, repo: str, number: int, *, author: str, sha: str, files: dict[str, bytes],
                  head_repo: str | None = None, association: str = "CONTRIBUTOR") -> dict[str, Any]:
        """A pull request whose head commit ``sha`` adds ``files``; the webhook payload's PR."""
        head_repo = head_repo or repo
        pull = {
            "number": number, "html_url": f"https://github.com/{repo}/pull/{number}",
            "user": {"login": author, "type": "User"}, "author_association": association,
            "head": {"sha": sha, "ref": "kernel", "repo": {"full_name": head_repo}},
            "base": {"sha": "base000", "ref": "main", "repo": {"full_name": repo}},
        }
        self.pulls[(repo, number)] = pull
        self.push(repo, number, sha, files)
        return pull

    def push(self, repo: str, number: int, sha: str, files: dict[str, bytes]) -> dict[str, Any]:
        pull = self.pulls[(repo, number)]
        pull["head"]["sha"] = sha
        head_repo = pull["head"]["repo"]["full_name"]
        for path, content in files.items():
            self.contents[(head_repo, sha, path)] = content
        self.files[(repo, number)] = [{"filename": path, "status": "added"} for path in files]
        return pull

    def checks_on(self, sha: str) -> list[CheckRun]:
        return [c for c in self.check_runs.values() if c.head_sha == sha]

    def comments_on(self, number: int) -> list[Comment]:
        return [c for c in self.comments.values() if c.number == number]

    # -- the API -------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body: Any = await request.json() if request.can_read_body else None
        self.calls.append(Call(request.method, request.path, body))
        self.tokens.add(request.headers.get("Authorization"))
        parts = request.path.strip("/").split("/")
        if len(parts) < 3 or parts[0] != "repos":
            return self._missing()
        repo, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        if request.method == "GET" and rest[:1] == ["pulls"] and len(rest) == 2:
            return self._json(self.pulls.get((repo, int(rest[1]))))
        if request.method == "GET" and rest[:1] == ["pulls"] and rest[2:] == ["files"]:
            page = int(request.query.get("page", "1"))
            return self._json(self.files.get((repo, int(rest[1]))) if page == 1 else [])
        if request.method == "GET" and rest[:1] == ["contents"]:
            content = self.contents.get((repo, request.query.get("ref", ""), "/".join(rest[1:])))
            if content is None:
                return self._missing()
            return self._json({"type": "file", "encoding": "base64", "content": base64.b64encode(content).decode()})
        if request.method == "POST" and rest == ["check-runs"]:
            return self._json(self._create_check(body))
        if request.method == "PATCH" and rest[:1] == ["check-runs"]:
            return self._json(self._update_check(int(rest[1]), body))
        if rest[:1] == ["issues"] and rest[2:3] == ["comments"]:
            number = int(rest[1])
            if request.method == "GET":
                return self._json([self._comment_json(c) for c in self.comments_on(number)])
            comment = Comment(next(self._ids), number, body["body"], edits=[body["body"]])
            self.comments[comment.id] = comment
            return self._json(self._comment_json(comment), status=201)
        if request.method == "PATCH" and rest[:2] == ["issues", "comments"]:
            found = self.comments.get(int(rest[2]))
            if found is None or found.login != BOT_LOGIN:
                return self._json({"message": "Not Found"}, status=404)
            found.body = body["body"]
            found.edits.append(found.body)
            return self._json(self._comment_json(found))
        return self._missing()

    def _create_check(self, body: dict[str, Any]) -> dict[str, Any]:
        run = CheckRun(next(self._ids), body["name"], body["head_sha"], body.get("status", "queued"),
                       body.get("conclusion"), body.get("output") or {}, body.get("details_url"))
        run.history.append(dict(body))
        self.check_runs[run.id] = run
        return {"id": run.id, "name": run.name, "status": run.status}

    def _update_check(self, check_id: int, body: dict[str, Any]) -> dict[str, Any]:
        run = self.check_runs[check_id]
        run.status = body.get("status", run.status)
        run.conclusion = body.get("conclusion", run.conclusion)
        run.output = body.get("output", run.output)
        run.history.append(dict(body))
        return {"id": run.id, "status": run.status, "conclusion": run.conclusion}

    @staticmethod
    def _comment_json(comment: Comment) -> dict[str, Any]:
        return {"id": comment.id, "body": comment.body, "user": {"login": comment.login, "type": "Bot"}}

    @staticmethod
    def _json(value: Any, status: int = 200) -> web.Response:
        if value is None:
            return FakeGitHub._missing()
        return web.json_response(value, status=status)

    @staticmethod
    def _missing() -> web.Response:
        return web.json_response({"message": "Not Found"}, status=404)
