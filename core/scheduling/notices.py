"""The words of every scheduled announcement, as neutral reply blocks each adapter renders natively.

Built here once, so Discord, Slack and the console all say the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.engine import Engine

from kernelcup.core.leaderboards.ranking import RankChange
from kernelcup.core.messages import Block, Reply, Table, Text
from kernelcup.core.pipeline.report import format_seconds
from kernelcup.core.scheduling.announcements import Announcement, Occasion
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard, Run, User
from kernelcup.core.when import relative, show_utc


@dataclass(frozen=True)
class FinalRow:
    """One line of the final standings of a GPU, as announced."""

    rank: int | None  # None: the re-run did not pass
    tied: bool
    user_name: str
    score: float | None
    score_low: float | None
    score_high: float | None
    rank_before: int
    submission_id: int
    note: str = ""


def opened_reply(name: str, gpus: Sequence[str], deadline: datetime, now: datetime) -> Reply:
    return Reply([
        Text(f"🏁 Leaderboard {name} is open", style="title"),
        Text(f"GPUs: {', '.join(gpus) or 'none yet'}. Closes {show_utc(deadline)} ({relative(deadline, now)})."),
        Text(f"Start with `task {name}` and `template {name}`; rank with `submit ranked`.", style="hint"),
    ])


def reminder_reply(name: str, deadline: datetime, now: datetime) -> Reply:
    return Reply([
        Text(f"⏰ {name} closes {relative(deadline, now)}", style="title"),
        Text(f"Deadline: {show_utc(deadline)}. Ranked submissions that arrive later are refused."),
    ])


def closed_reply(name: str, deadline: datetime, top_n: int, rounds: int) -> Reply:
    return Reply([
        Text(f"🔒 {name} closed at {show_utc(deadline)}", style="title"),
        Text(
            "Ranked runs queued before the deadline finish first. Then the top "
            f"{top_n} entries per GPU are re-run {rounds}× back to back with fresh secret inputs, "
            "and the final standings follow."
        ),
    ])


def new_leader_reply(
    name: str, gpu: str, user_name: str, score: float, previous_leader: str | None
) -> Reply:
    ahead = f", ahead of {previous_leader}" if previous_leader else ""
    return Reply([
        Text(f"🥇 {user_name} takes first place on {name} ({gpu})", style="title"),
        Text(f"Score {format_seconds(score)}{ahead}."),
    ])


def new_leader_announcement(engine: Engine, run: Run, change: RankChange) -> Announcement | None:
    """The "new #1" announcement for a ranked run that just took first place (public boards only)."""
    if not change.is_new_leader or run.score is None:
        return None
    with session_scope(engine) as session:
        board = session.get(Leaderboard, run.leaderboard_id)
        user = session.get(User, run.user_id)
        previous = session.get(User, change.previous_leader_user_id) if change.previous_leader_user_id else None
        if board is None or user is None or board.visibility != "public":
            return None
        reply = new_leader_reply(board.name, run.gpu, user.display_name, run.score,
                                 previous.display_name if previous else None)
        return Announcement(board.name, Occasion.NEW_LEADER, reply)


def final_standings_reply(
    name: str, by_gpu: dict[str, list[FinalRow]], top_n: int, rounds: int
) -> Reply:
    blocks: list[Block] = [
        Text(f"🏆 Final standings · {name}", style="title"),
        Text(
            f"The top {top_n} per GPU re-run {rounds}× back to back, interleaved, with fresh secret "
            "inputs; ranked by the re-runs. '=' marks a tie: the difference is inside the measured "
            "noise (95% CI of the median).",
            style="hint",
        ),
    ]
    if not any(by_gpu.values()):
        blocks.append(Text("There were no ranked entries.", style="hint"))
    for gpu, rows in by_gpu.items():
        if not rows:
            continue
        table_rows = tuple(
            (
                "-" if row.rank is None else f"{row.rank}{'=' if row.tied else ''}",
                row.user_name,
                format_seconds(row.score) if row.score is not None else row.note,
                _noise(row),
                str(row.rank_before),
                f"#{row.submission_id}",
            )
            for row in rows
        )
        blocks.append(
            Table(("rank", "user", "score", "noise range", "was", "submission"), table_rows, title=gpu)
        )
    return Reply(blocks)


def _noise(row: FinalRow) -> str:
    if row.score_low is None or row.score_high is None:
        return "-"
    return f"{format_seconds(row.score_low)} – {format_seconds(row.score_high)}"
