"""Admin commands: bans, rate limits, pausing submissions, syncing leaderboards from a folder."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kernelcup.core.commands.registry import CommandContext, Kind, Param, command
from kernelcup.core.commands.submit import MODE_ALIASES
from kernelcup.core.errors import UserError
from kernelcup.core.messages import Block, Reply, Request, Table, Text
from kernelcup.core.roles import Role
from kernelcup.core.when import parse_when, relative, show_utc
from kernelcup.harness.spec import Mode

if TYPE_CHECKING:
    from kernelcup.core.leaderboards.catalog import SyncReport

USER = Param("user", Kind.USER, "identity such as discord:1234 or console:alice", required=True, positional=True)


@command("ban", "stop a user from submitting", USER, role=Role.ADMIN, group="admin")
def ban_command(app: CommandContext, request: Request) -> Reply:
    return _set_ban(app, request, True)


@command("unban", "let a banned user submit again", USER, role=Role.ADMIN, group="admin")
def unban_command(app: CommandContext, request: Request) -> Reply:
    return _set_ban(app, request, False)


def _set_ban(app: CommandContext, request: Request, banned: bool) -> Reply:
    from kernelcup.core.access.users import find_user
    from kernelcup.core.store.db import session_scope

    with session_scope(app.engine) as session:
        user = find_user(session, request.args["user"])
        user.banned = banned
        session.add(user)
    word = "banned" if banned else "unbanned"
    return Reply([Text(f"{user.display_name} ({user.identity}) is {word}.", style="success")])


@command(
    "rate-limit",
    "limit submissions per user and hour (no number: show the limits; 0: remove)",
    Param("leaderboard", Kind.LEADERBOARD, "a leaderboard, or * for all", positional=True),
    Param("mode", Kind.CHOICE, "a mode, or * for all", positional=True,
          choices=(*[m.value for m in Mode], "*"),  # "*": kernelcup.core.access.ratelimits.ANY_MODE
          choice_aliases=MODE_ALIASES),
    Param("per_hour", Kind.INT, "submissions per hour", positional=True),
    role=Role.ADMIN,
    group="admin",
)
def rate_limit_command(app: CommandContext, request: Request) -> Reply:
    from sqlmodel import select

    from kernelcup.core.access.ratelimits import list_limits, set_limit
    from kernelcup.core.leaderboards.catalog import get_leaderboard
    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.models import Leaderboard

    args = request.args
    with session_scope(app.engine) as session:
        if args["per_hour"] is not None:
            if not args["leaderboard"] or not args["mode"]:
                raise UserError("Give a leaderboard (or *), a mode (or *) and a number per hour.")
            board_id = None if args["leaderboard"] == "*" else get_leaderboard(session, args["leaderboard"]).id
            if args["per_hour"] < 0:
                raise UserError("The number per hour cannot be negative.")
            set_limit(session, board_id, args["mode"], args["per_hour"] or None)
        limits = list_limits(session)
        names = {b.id: b.name for b in session.exec(select(Leaderboard)).all()}
        rows = tuple(
            (names.get(limit.leaderboard_id, "*") if limit.leaderboard_id else "*", limit.mode, str(limit.max_per_hour))
            for limit in limits
        )
    if not rows:
        return Reply([Text("No rate limits are set.", style="hint")])
    return Reply([Table(("leaderboard", "mode", "per hour"), rows, title="Rate limits")])


@command("pause", "stop accepting submissions (queued jobs still run)", role=Role.ADMIN, group="admin")
def pause_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.switches import set_submissions_paused

    with session_scope(app.engine) as session:
        set_submissions_paused(session, True)
    return Reply([Text("Submissions are paused; queued jobs still run.", style="warning")])


@command("resume", "accept submissions again", role=Role.ADMIN, group="admin")
def resume_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.switches import set_submissions_paused

    with session_scope(app.engine) as session:
        set_submissions_paused(session, False)
    return Reply([Text("Submissions are accepted again.", style="success")])


@command(
    "sync",
    "create or refresh every leaderboard from the leaderboards folder, or from a problems repository",
    Param("source", Kind.SOURCE, "a git URL (e.g. GPU MODE's reference-kernels) or, on the bot's own terminal, "
          "a folder or local git repository of problems; default: the leaderboards folder", aliases=("from",)),
    role=Role.ADMIN,
    group="admin",
)
def sync_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.store.db import session_scope

    if request.args.get("source"):
        return _sync_from(app, request, str(request.args["source"]))
    with session_scope(app.engine) as session:
        report = app.sync_leaderboards(session)
    app.reschedule()  # new leaderboards get their close, reminders and "opened" announcement
    return _sync_reply(report, f"Synced {app.settings.leaderboards_dir}", None)


def _sync_from(app: CommandContext, request: Request, text: str) -> Reply:
    """``sync --from``: a problems repository cloned (or a folder read) and synced as leaderboards
    (kernelcup.core.leaderboards.sources). A leaderboard of the same name from elsewhere is left
    alone and reported; a second sync of the same source updates its own."""
    from kernelcup.core.leaderboards.sources import fetch_source
    from kernelcup.core.store.db import session_scope

    source = fetch_source(text, app.settings.leaderboards_dir, from_this_machine=request.from_this_machine)
    with session_scope(app.engine) as session:
        report = app.sync_leaderboards(session, source)
    app.reschedule()
    return _sync_reply(report, f"Synced {source.shown}", source.owner)


def _sync_reply(report: SyncReport, title: str, root: Path | None) -> Reply:
    """One row per leaderboard folder: created, updated, unchanged, or skipped and why. Under
    ``root``, a skipped folder is named by its task.yml's path."""

    def skipped(name: str, why: str) -> str:
        folder = report.folders.get(name)
        if root is None or folder is None or not folder.is_relative_to(root):
            return f"error: {why}"
        return f"skipped, {(folder / 'task.yml').relative_to(root)}: {why}"

    rows = tuple(
        [(name, "created, closed: its deadline has passed" if name in report.closed else "created")
         for name in report.created]
        + [(name, "updated") for name in report.updated]
        + [(name, "unchanged") for name in report.unchanged]
        + [(name, skipped(name, why)) for name, why in report.errors.items()]
    )
    if not rows and root is not None:
        return Reply([Text(f"{title}: no folder with a task.yml was found there.", style="warning")], ok=False)
    return Reply([Table(("leaderboard", "sync"), rows, title=title)], ok=not report.errors)


@command(
    "set-deadline",
    "move a leaderboard's deadline (a closed one reopens)",
    Param("leaderboard", Kind.LEADERBOARD, "leaderboard name", required=True, positional=True),
    Param("deadline", Kind.WHEN, "e.g. 2026-12-31T23:59Z, +3d, +12h; +0m closes it now", required=True,
          positional=True),
    role=Role.ADMIN,
    group="admin",
)
def set_deadline_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.leaderboards.catalog import get_leaderboard
    from kernelcup.core.scheduling.deadlines import set_deadline
    from kernelcup.core.store.db import session_scope

    now = app.now()
    deadline = parse_when(str(request.args["deadline"]), now)
    if deadline < now:
        raise UserError(f"{show_utc(deadline)} has already passed.", "Give a future time, or +0m to close it now.")
    with session_scope(app.engine) as session:
        board = get_leaderboard(session, request.args["leaderboard"])
        assert board.id is not None
        name, board_id = board.name, board.id
    reopened = set_deadline(app.engine, board_id, deadline)
    app.reschedule(board_id)
    when = f"{show_utc(deadline)} ({relative(deadline, now)})"
    blocks: list[Block] = [Text(f"{name} now closes {when}.", style="success")]
    if reopened:
        blocks.append(Text(f"{name} was closed: it is open again, and any earlier final standings are "
                           "discarded; they run again at the new deadline.", style="warning"))
    return Reply(blocks)
