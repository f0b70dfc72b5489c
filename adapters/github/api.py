"""The few GitHub REST calls the adapter makes, over httpx (a transport can be injected)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

import httpx

API_VERSION = "2022-11-28"
MAX_PAGES = 30  # GitHub lists at most 3,000 files of a pull request


class GitHubApiError(Exception):
    """GitHub refused or could not be reached; the message names the call and the answer."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Output:
    """A check run's output: shown on the pull request's Checks tab."""

    title: str
    summary: str
    text: str = ""

    def json(self) -> dict[str, str]:
        out = {"title": self.title or "kernelcup", "summary": self.summary or self.title or "-"}
        if self.text:
            out["text"] = self.text
        return out


class GitHubApi:
    def __init__(self, api_url: str, token: str, *, timeout_s: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
                   "X-GitHub-Api-Version": API_VERSION, "User-Agent": "kernelcup"}
        self.client = httpx.AsyncClient(base_url=api_url, headers=headers, timeout=timeout_s, transport=transport)

    async def aclose(self) -> None:
        await self.client.aclose()

    async def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = await self.client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise GitHubApiError(f"{method} {path}: could not reach GitHub ({exc!r})") from exc
        if response.status_code >= 400:
            try:
                message = response.json().get("message", "")
            except ValueError:
                message = response.text[:200]
            raise GitHubApiError(f"{method} {path}: {response.status_code} {message}", response.status_code)
        return response.json() if response.content else None

    async def pull(self, repo: str, number: int) -> dict[str, Any]:
        found: dict[str, Any] = await self.call("GET", f"/repos/{repo}/pulls/{number}")
        return found

    async def pull_files(self, repo: str, number: int) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = []
        for page in range(1, MAX_PAGES + 1):
            batch = await self.call("GET", f"/repos/{repo}/pulls/{number}/files",
                                    params={"per_page": 100, "page": page})
            files.extend(batch or [])
            if len(batch or []) < 100:
                break
        return files

    async def content(self, repo: str, path: str, ref: str) -> bytes:
        found = await self.call("GET", f"/repos/{repo}/contents/{path}", params={"ref": ref})
        if not isinstance(found, dict) or found.get("type", "file") != "file":
            raise GitHubApiError(f"{path} at {ref} is not a file")
        if found.get("encoding") == "base64":
            return base64.b64decode(str(found.get("content") or ""))
        download = found.get("download_url")  # over 1 MB the API sends no content
        if not download:
            raise GitHubApiError(f"{path} at {ref} came without its content")
        response = await self.client.get(str(download))
        response.raise_for_status()
        return response.content

    async def create_check(self, repo: str, sha: str, name: str, output: Output, *, status: str = "queued",
                           conclusion: str | None = None, details_url: str | None = None) -> int:
        body: dict[str, Any] = {"name": name, "head_sha": sha, "status": status, "output": output.json()}
        if conclusion is not None:
            body.update(status="completed", conclusion=conclusion)
        if details_url:
            body["details_url"] = details_url
        created = await self.call("POST", f"/repos/{repo}/check-runs", json=body)
        return int(created["id"])

    async def update_check(self, repo: str, check_id: int, output: Output, *, status: str = "in_progress",
                           conclusion: str | None = None) -> None:
        body: dict[str, Any] = {"status": status, "output": output.json()}
        if conclusion is not None:
            body.update(status="completed", conclusion=conclusion)
        await self.call("PATCH", f"/repos/{repo}/check-runs/{check_id}", json=body)

    async def comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for page in range(1, MAX_PAGES + 1):
            batch = await self.call("GET", f"/repos/{repo}/issues/{number}/comments",
                                    params={"per_page": 100, "page": page})
            found.extend(batch or [])
            if len(batch or []) < 100:
                break
        return found

    async def create_comment(self, repo: str, number: int, body: str) -> int:
        created = await self.call("POST", f"/repos/{repo}/issues/{number}/comments", json={"body": body})
        return int(created["id"])

    async def update_comment(self, repo: str, comment_id: int, body: str) -> None:
        await self.call("PATCH", f"/repos/{repo}/issues/comments/{comment_id}", json={"body": body})
