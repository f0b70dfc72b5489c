"""The GitHub adapter's settings: the ``github:`` section of the config file; the webhook secret
and the API token from the environment only (a secret in a config file ends up in a repository
sooner or later)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kernelcup.core.config import Settings, as_list
from kernelcup.core.plugins import DeferredAdapter

WEBHOOK_SECRET = "GITHUB_WEBHOOK_SECRET"  # the webhook's secret: checks X-Hub-Signature-256
BOT_TOKEN = "GITHUB_BOT_TOKEN"  # checks: write, pull requests: write, contents: read (a GitHub App's)
SECTION = "github"
TURN_ON = f"set {WEBHOOK_SECRET} and {BOT_TOKEN} turns it on (README, GitHub)"
TRUE = ("1", "true", "yes", "on")


def configured(env: Mapping[str, str]) -> bool:
    """``kernelcup serve`` builds the adapter when either secret is set; with only one, the
    adapter says in one line what is missing instead of serving (``GitHubSettings.load``)."""
    return bool(env.get(WEBHOOK_SECRET, "").strip() or env.get(BOT_TOKEN, "").strip())


# The ``kernelcup.adapters`` entry point: starlette, uvicorn and httpx are imported only when it is built.
ADAPTER = DeferredAdapter("kernelcup.adapters.github.adapter:GitHubAdapter", configured)


class GitHubConfigError(Exception):
    """The GitHub settings cannot work; the message says what to set."""


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).strip().lower() in TRUE


@dataclass(frozen=True)
class GitHubSettings:
    webhook_secret: str
    token: str
    host: str = "127.0.0.1"
    port: int = 8091
    path: str = "/github/webhook"
    api_url: str = "https://api.github.com"
    folder: str = "submissions"  # submissions/<leaderboard>/<name>.py (or .cu)
    check_name: str = "kernelcup"
    # A fork's pull request runs (test mode only) after an approver comments `/kernelcup approve`.
    fork_approval: bool = True
    # Who may approve a fork's run and submit a pull request's file for its author: these
    # author associations on the repository, and kernelcup's admins and creators.
    approvers: tuple[str, ...] = ("OWNER", "MEMBER", "COLLABORATOR")
    gpus: tuple[str, ...] = ()  # a pull request's GPUs where its file names none and several fit
    update_interval_s: float = 2.0  # at most one edit of a check run and comment per this
    max_log_chars: int = 8000  # per log or profile in the comment
    timeout_s: float = 30.0

    @classmethod
    def load(cls, settings: Settings, env: Mapping[str, str]) -> GitHubSettings:
        section: dict[str, Any] = dict(settings.sections.get(SECTION) or {})
        for secret in ("webhook_secret", "token"):
            if secret in section:
                raise GitHubConfigError(f"github.{secret} must not be in the config file: "
                                        f"{WEBHOOK_SECRET} and {BOT_TOKEN} come from the environment only.")
        secret, token = env.get(WEBHOOK_SECRET, "").strip(), env.get(BOT_TOKEN, "").strip()
        if not secret:
            raise GitHubConfigError(f"{WEBHOOK_SECRET} is not set: every delivery would be refused.")
        if not token:
            raise GitHubConfigError(f"{BOT_TOKEN} is not set: no check run or comment could be written.")
        path = str(section.get("path", cls.path))
        return cls(
            webhook_secret=secret,
            token=token,
            host=str(section.get("host", cls.host)),
            port=int(section.get("port", cls.port)),
            path=path if path.startswith("/") else "/" + path,
            api_url=str(section.get("api_url", cls.api_url)).rstrip("/"),
            folder=str(section.get("folder", cls.folder)).strip("/"),
            check_name=str(section.get("check_name", cls.check_name)),
            fork_approval=_flag(section.get("fork_approval", cls.fork_approval)),
            approvers=tuple(a.upper() for a in as_list(section.get("approvers", list(cls.approvers)))),
            gpus=tuple(as_list(section.get("gpus", []))),
            update_interval_s=float(section.get("update_interval_s", cls.update_interval_s)),
            max_log_chars=int(section.get("max_log_chars", cls.max_log_chars)),
            timeout_s=float(section.get("timeout_s", cls.timeout_s)),
        )
