"""Submitting a kernel, and cancelling one's jobs."""

from __future__ import annotations

from kernelcup.core.access.permissions import allows
from kernelcup.core.commands.registry import CommandContext, Kind, Param, command
from kernelcup.core.errors import Forbidden, NotFound, UserError
from kernelcup.core.messages import Block, ProgressBlock, Reply, Request, Text
from kernelcup.core.roles import Role
from kernelcup.harness.spec import Mode

MODES = tuple(m.value for m in Mode)
# GPU MODE's popcorn-cli calls a ranked submission "leaderboard": the same mode here.
MODE_ALIASES = (("leaderboard", Mode.RANKED.value),)


@command(
    "submit",
    "run a kernel: test (correctness), benchmark (timing), ranked (counts), profile",
    Param("mode", Kind.CHOICE, "what to run", required=True, positional=True, choices=MODES,
          choice_aliases=MODE_ALIASES),
    Param("file", Kind.FILE, "your .py (custom_kernel) or .cu file", required=True, positional=True),
    Param("leaderboard", Kind.LEADERBOARD, "default: the file's #!POPCORN leaderboard line"),
    Param("gpu", Kind.GPU, "GPUs to run on (default: the file's #!POPCORN gpus line)", many=True),
)
def submit_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.pipeline.submissions import SubmissionFile, submit
    from kernelcup.core.store.db import session_scope

    if not request.attachments:
        raise UserError("Attach the file to submit.", "A .py file that defines custom_kernel, or a .cu file.")
    if len(request.attachments) > 1:
        raise UserError("Attach exactly one file per submission.")
    attachment = request.attachments[0]
    with session_scope(app.engine) as session:
        submission, jobs = submit(
            session,
            app.settings,
            actor=request.actor,
            role=request.role,
            file=SubmissionFile(attachment.name, attachment.content),
            mode=Mode(request.args["mode"]),
            leaderboard=request.args["leaderboard"],
            gpus=list(request.args["gpu"] or []),
            served_gpus=app.served_gpus(),
            now=app.now(),
            reply_to=request.reply_to,
        )
        assert submission.id is not None
        board_name = request.args["leaderboard"]
    blocks: list[Block] = [
        Text(f"Submission #{submission.id} ({submission.mode}) of {submission.file_name} accepted"
             + (f" for {board_name}" if board_name else "") + ".", style="success")
    ]
    blocks.extend(ProgressBlock(job_id=job.id or 0, gpu=job.gpu, phase="queued") for job in jobs)
    return Reply(blocks, submission_id=submission.id)


@command(
    "cancel",
    "cancel a submission's jobs that have not finished",
    Param("id", Kind.INT, "submission id", required=True, positional=True),
)
def cancel_command(app: CommandContext, request: Request) -> Reply:
    from sqlmodel import col, select

    from kernelcup.core.access.users import user_for
    from kernelcup.core.access.visibility import may_see_board
    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.models import Job, JobStatus, Leaderboard, Submission

    with session_scope(app.engine) as session:
        submission = session.get(Submission, int(request.args["id"]))
        user = user_for(session, request.actor)
        board = session.get(Leaderboard, submission.leaderboard_id) if submission is not None else None
        own = submission is not None and submission.user_id == user.id
        if submission is None or board is None or not (own or may_see_board(board, user_id=user.id,
                                                                            role=request.role)):
            # One on a hidden leaderboard answers as a missing one.
            raise NotFound(f"There is no submission #{request.args['id']}.")
        if not own and not allows(request.role, Role.ADMIN):
            raise Forbidden("You can only cancel your own submissions.")
        open_jobs = session.exec(
            select(Job.id).where(
                Job.submission_id == submission.id,
                col(Job.status).in_([JobStatus.QUEUED.value, JobStatus.RUNNING.value]),
            )
        ).all()
    if not open_jobs:
        return Reply([Text(f"Submission #{submission.id} has nothing left to cancel.", style="hint")])
    app.cancel_jobs([job_id for job_id in open_jobs if job_id is not None])
    return Reply([Text(f"Cancelling {len(open_jobs)} job(s) of submission #{submission.id}.", style="success")])
