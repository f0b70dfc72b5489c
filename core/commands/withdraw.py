"""Withdrawing a submission from the rankings: by its author, or by an admin with a reason."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kernelcup.core.access.permissions import allows
from kernelcup.core.commands.registry import CommandContext, Kind, Param, command
from kernelcup.core.errors import Forbidden, NotFound, UserError
from kernelcup.core.messages import Block, Reply, Request, Text
from kernelcup.core.roles import Role

if TYPE_CHECKING:
    from sqlmodel import Session


@command(
    "withdraw",
    "take one of your submissions out of the rankings (admins: anyone's, with a reason)",
    Param("id", Kind.INT, "submission id", required=True, positional=True),
    Param("reason", Kind.TEXT, "why (required when an admin withdraws someone else's)"),
)
def withdraw_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.access.users import user_for
    from kernelcup.core.access.visibility import may_see_submission
    from kernelcup.core.pipeline.withdrawal import Withdrawal, withdraw
    from kernelcup.core.store.db import in_transaction
    from kernelcup.core.store.models import FINAL_MODE, Leaderboard, Submission

    submission_id = int(request.args["id"])
    reason = str(request.args["reason"] or "").strip()[:500]

    def work(session: Session) -> Withdrawal:
        submission = session.get(Submission, submission_id)
        user = user_for(session, request.actor)
        board = session.get(Leaderboard, submission.leaderboard_id) if submission is not None else None
        if submission is None or board is None or not may_see_submission(submission, board, user_id=user.id,
                                                                          role=request.role):
            raise NotFound(f"There is no submission #{submission_id}.", "`mine` lists yours.")
        if submission.user_id != user.id:
            if not allows(request.role, Role.ADMIN):
                raise Forbidden("You can only withdraw your own submissions.")
            if not reason:
                raise UserError("Give a reason to withdraw someone else's submission.",
                                f"withdraw {submission_id} --reason \"...\": it is logged and stored.")
        if submission.mode == FINAL_MODE:
            raise UserError(f"#{submission_id} is a re-run for the final standings, not an entry.",
                            "Withdraw the submission it re-runs.")
        if submission.withdrawn_at is not None:
            raise UserError(f"Submission #{submission_id} is already withdrawn.")
        return withdraw(session, submission, by=user, reason=reason or None, now=app.now())

    done = in_transaction(app.engine, work)
    if done.open_job_ids:
        app.cancel_jobs(done.open_job_ids)
    blocks: list[Block] = [Text(f"Submission #{submission_id} is withdrawn: it counts in no ranking.",
                                style="success")]
    if done.open_job_ids:
        blocks.append(Text(f"Cancelling its {len(done.open_job_ids)} unfinished job(s).", style="hint"))
    if done.left_final_standings:
        blocks.append(Text("It left the final standings; the entries below it moved up.", style="hint"))
    blocks.append(Text("Its row is kept for audit, seen only by you and admins.", style="hint"))
    return Reply(blocks, ephemeral=True)
