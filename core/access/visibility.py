"""Who may see what: a hidden leaderboard, a submission's code. One place, so the chat commands
and the web pages cannot drift apart."""

from __future__ import annotations

from datetime import datetime

from kernelcup.core.access.permissions import allows
from kernelcup.core.config import Settings
from kernelcup.core.leaderboards.catalog import task_of
from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import Leaderboard, Role, Submission

# task.yml may say whether its code becomes public after the deadline; this key overrides the
# default an adapter passes (kernelcup's own extension of GPU MODE's format).
CODE_PUBLIC_KEY = "code_public_after_deadline"


def may_see_board(board: Leaderboard, *, user_id: int | None, role: Role) -> bool:
    """Public leaderboards for everyone; a hidden one for its creator and admins."""
    return board.visibility == "public" or allows(role, Role.ADMIN) or (
        user_id is not None and board.creator_id == user_id
    )


def default_code_public(settings: Settings) -> bool:
    """The operator's default for leaderboards whose task.yml says nothing (``web:`` section,
    ``code_public_after_deadline``): the same for chat commands and the web."""
    value = (settings.sections.get("web") or {}).get(CODE_PUBLIC_KEY, True)
    return value if isinstance(value, bool) else str(value).strip().lower() not in ("0", "false", "no", "off")


def code_public_after_deadline(board: Leaderboard, default: bool = True) -> bool:
    value = task_of(board).get(CODE_PUBLIC_KEY)
    return default if value is None else bool(value)


def may_see_code(
    submission: Submission,
    board: Leaderboard,
    *,
    user_id: int | None,
    role: Role,
    now: datetime,
    public_after_deadline: bool = True,
) -> bool:
    """Code (and what could echo it: logs, profiles) is its author's and the admins' until the
    deadline; after it, everyone's if the leaderboard allows."""
    if (user_id is not None and submission.user_id == user_id) or allows(role, Role.ADMIN):
        return True
    return as_utc(board.deadline) <= now and code_public_after_deadline(board, public_after_deadline)
