"""Pull requests as the adapter sees them, and which of their files are submissions."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kernelcup.core.messages import Actor

EXTENSIONS = (".py", ".cu")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ASSOCIATION_ROLE = "github-association:"  # a platform role: OWNER, MEMBER, COLLABORATOR, ...


def actor(login: str, association: str = "") -> Actor:
    """``github:<login>``; the repository association becomes a platform role config may name."""
    roles = (f"{ASSOCIATION_ROLE}{association.upper()}",) if association else ()
    return Actor(f"github:{login}", login, roles)


@dataclass(frozen=True)
class PullRequest:
    repo: str  # the base repository, owner/name: check runs and comments go here
    number: int
    head_sha: str
    head_repo: str  # where the head commit's files are: a fork's own repository
    author: str
    author_association: str
    html_url: str

    @property
    def from_fork(self) -> bool:
        return self.head_repo != self.repo

    @property
    def author_actor(self) -> Actor:
        return actor(self.author, self.author_association)

    @classmethod
    def from_payload(cls, pull: dict[str, Any]) -> PullRequest:
        base, head = pull.get("base") or {}, pull.get("head") or {}
        repo = str((base.get("repo") or {}).get("full_name") or "")
        head_repo = (head.get("repo") or {}).get("full_name")  # null: the fork was deleted
        return cls(
            repo=repo,
            number=int(pull["number"]),
            head_sha=str(head.get("sha") or ""),
            head_repo=str(head_repo or "(deleted fork)"),
            author=str((pull.get("user") or {}).get("login") or ""),
            author_association=str(pull.get("author_association") or ""),
            html_url=str(pull.get("html_url") or ""),
        )


@dataclass(frozen=True)
class SubmissionPath:
    """``<folder>/<leaderboard>/<name>.py`` (or ``.cu``) in a pull request."""

    path: str
    leaderboard: str
    name: str


def submission_path(path: str, folder: str) -> SubmissionPath | None:
    prefix = f"{folder}/" if folder else ""
    if not path.startswith(prefix):
        return None
    parts = path[len(prefix):].split("/")
    if len(parts) != 2 or not all(_NAME.fullmatch(p) for p in parts) or not parts[1].endswith(EXTENSIONS):
        return None
    return SubmissionPath(path, parts[0], parts[1])


@dataclass(frozen=True)
class ChangedFiles:
    submissions: list[SubmissionPath]
    others: list[str]  # under the folder, but not laid out as a submission


def changed_files(files: list[dict[str, Any]], folder: str) -> ChangedFiles:
    """The pull request's files added or changed under ``folder`` (removed ones are not run)."""
    submissions: list[SubmissionPath] = []
    others: list[str] = []
    prefix = f"{folder}/" if folder else ""
    for entry in files:
        path = str(entry.get("filename") or "")
        if entry.get("status") == "removed" or not path.startswith(prefix):
            continue
        found = submission_path(path, folder)
        if found is None:
            others.append(path)
        else:
            submissions.append(found)
    return ChangedFiles(submissions, others)
