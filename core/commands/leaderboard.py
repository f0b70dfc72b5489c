"""Commands anyone may use to look around: help, list, show, task, template, mine, get-submission,
and the creator's create and delete."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from kernelcup.core.access.permissions import allows
from kernelcup.core.commands.registry import CommandContext, Kind, Param, command, registered, usage
from kernelcup.core.errors import Forbidden, NotFound, UserError
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.messages import Block, File, Reply, Request, Table, Text
from kernelcup.core.roles import Role
from kernelcup.core.when import parse_when, relative, show_utc

if TYPE_CHECKING:  # the store is imported by the handlers as they run: the registry loads without it
    from sqlmodel import Session

    from kernelcup.core.leaderboards.ranking import Standing
    from kernelcup.core.store.models import Job, Leaderboard, Run, Submission

LEADERBOARD = Param("leaderboard", Kind.LEADERBOARD, "leaderboard name", required=True, positional=True)
MAX_BUNDLE_BYTES = 8 * 1024 * 1024
MAX_RANKING_CHARTS = 4  # pictures `show` attaches, one per GPU: a chat message holds a few


@command("help", "list the commands, or explain one", Param("topic", Kind.TEXT, "a command", positional=True))
def help_command(app: CommandContext, request: Request) -> Reply:
    topic = request.args.get("topic")
    visible = [c for c in registered() if allows(request.role, c.role)]
    if topic:
        cmd = next((c for c in visible if c.name == topic), None)
        if cmd is None:
            raise NotFound(f"There is no command {topic!r}.", "Type `help` for the list.")
        lines = [cmd.help, usage(cmd)] + [f"  {p.name}: {p.help}" for p in cmd.params]
        return Reply([Text("\n".join(lines))])
    rows = tuple((c.name, c.group, c.help) for c in visible)
    return Reply([Table(("command", "group", "what it does"), rows, title="kernelcup commands")])


def _how_to_load(request: Request) -> list[Block]:
    """For an admin facing no leaderboards: the two ways to get some (a pip install has no checkout)."""
    if request.role is not Role.ADMIN:
        return []
    where = ("`kernelcup init DIR` writes the shipped ones into a folder to run kernelcup in; "
             if request.from_this_machine else "")
    return [Text(f"{where}`admin sync --from <git URL>` loads a problems repository such as "
                 "https://github.com/gpu-mode/reference-kernels.", style="hint")]


@command("list", "leaderboards with their deadlines, GPUs and number of entries")
def list_command(app: CommandContext, request: Request) -> Reply:
    from sqlmodel import col, select

    from kernelcup.core.access.visibility import may_see_board
    from kernelcup.core.leaderboards.ranking import entry_counts
    from kernelcup.core.store.db import as_utc, session_scope
    from kernelcup.core.store.models import Leaderboard, User

    now = app.now()
    with session_scope(app.engine) as session:
        user_id = session.exec(select(User.id).where(User.identity == request.actor.identity)).first()
        boards = session.exec(select(Leaderboard).order_by(col(Leaderboard.name))).all()
        boards = [b for b in boards if may_see_board(b, user_id=user_id, role=request.role)]
        if not boards:
            return Reply([Text("There are no leaderboards yet.", style="hint"), *_how_to_load(request)])
        counts = entry_counts(session, [b.id for b in boards if b.id is not None])
        rows = []
        for board in boards:
            assert board.id is not None
            deadline = as_utc(board.deadline)
            state = f"closes {relative(deadline, now)}" if deadline > now else f"closed {relative(deadline, now)}"
            rows.append(
                (
                    board.name,
                    f"{show_utc(deadline)} ({state})",
                    _runs_on(session, board) + _ranks_suffix(board),
                    str(counts.get(board.id, 0)),
                )
            )
    return Reply([Table(("leaderboard", "deadline", "GPUs", "entries"), tuple(rows), title="Leaderboards")])


@command(
    "show",
    "the ranking of a leaderboard, per GPU",
    LEADERBOARD,
    Param("gpu", Kind.GPU, "only this GPU"),
    Param("limit", Kind.INT, "how many entries", default=20),
    Param("offset", Kind.INT, "skip this many entries", default=0),
)
def show_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.charts import charts_on, ranking_images
    from kernelcup.core.charts.plots import RankingPlot, ranking_plot
    from kernelcup.core.leaderboards.catalog import multi_gpu_note, runnable_gpus
    from kernelcup.core.leaderboards.ranking import standings, tie_labels
    from kernelcup.core.pipeline.report import format_seconds
    from kernelcup.core.store.db import as_utc, session_scope

    now = app.now()
    with session_scope(app.engine) as session:
        board = _visible_board(session, request)
        assert board.id is not None
        gpus = runnable_gpus(session, board)
        wanted = request.args["gpu"]
        if wanted:
            match = [g for g in gpus if g.lower() == str(wanted).lower()]
            if not match:
                raise UserError(f"{board.name} does not run on {wanted}.", f"It runs on {', '.join(gpus)}.")
            gpus = match
        deadline = as_utc(board.deadline)
        multi = multi_gpu_note(board)
        blocks: list[Block] = [
            Text(f"{board.name}{f' · {multi}' if multi else ''} · deadline {show_utc(deadline)} "
                 f"({relative(deadline, now)})", style="title")
        ]
        limit = max(1, min(int(request.args["limit"]), 200))
        plots: list[tuple[str, RankingPlot]] = []
        for gpu in gpus:
            entries = standings(session, board.id, gpu, limit=limit, offset=max(0, request.args["offset"]))
            if not entries:
                blocks.append(Text(f"{gpu}: no ranked entries yet.", style="hint"))
                continue
            plots.append((f"{board.name}-{gpu}-ranking.png", ranking_plot(f"{board.name} on {gpu}", entries)))
            labels = tie_labels(entries)
            rows = tuple(
                (label, e.user_name, format_seconds(e.score), noise_of(e), f"#{e.submission_id}",
                 f"{as_utc(e.submitted_at):%Y-%m-%d %H:%M}")
                for label, e in zip(labels, entries, strict=True)
            )
            header = ("rank", "user", "score", "noise", "submission", "submitted (UTC)")
            blocks.append(Table(header, rows, title=gpu))
            if any(label.endswith("=") for label in labels):
                blocks.append(Text("n= : tied within noise (their scores' noise ranges meet).", style="hint"))
    if request.pictures and charts_on():  # drawn after the session is given back
        blocks.extend(ranking_images(plots[:MAX_RANKING_CHARTS]))
    return Reply(blocks)


def _runs_on(session: Session, board: Leaderboard) -> str:
    """The GPUs a leaderboard runs on here, as opened at sync (``kernelcup.core.leaderboards.devices``);
    "no GPU here" with what it needs where none of them can run it."""
    from kernelcup.core.leaderboards.catalog import cuda_words, declared_gpus, runnable_gpus

    runnable = runnable_gpus(session, board)
    if runnable:
        return ", ".join(runnable) + (" (CUDA only)" if board.needs_cuda else "")
    elsewhere = [g for g in declared_gpus(board) if g.lower() != "cpu"]
    why = cuda_words(board)
    parts = ([f"needs CUDA: {why}"] if why else []) + ([f"runs on {', '.join(elsewhere)}"] if elsewhere else [])
    return "no GPU here" + (f" ({'; '.join(parts)})" if parts else "")


def _ranks_suffix(board: Leaderboard) -> str:
    from kernelcup.core.leaderboards.catalog import world_size_of

    ranks = world_size_of(board)
    return f" (multi-GPU: {ranks} per run)" if ranks else ""


def noise_of(entry: Standing) -> str:
    """The half-width of the entry's noise range, as a share of its score (e.g. "±0.4%")."""
    if entry.score_low is None or entry.score_high is None or entry.score <= 0:
        return "–"
    return f"±{50 * (entry.score_high - entry.score_low) / entry.score:.1f}%"


@command("task", "a leaderboard's description and task files", LEADERBOARD)
def task_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.leaderboards.catalog import task_files, task_of, world_size_of
    from kernelcup.core.store.db import session_scope

    with session_scope(app.engine) as session:
        board = _visible_board(session, request)
        assert board.id is not None
        files = task_files(session, board.id)
        task = task_of(board)
    blocks: list[Block] = [Text(board.name, style="title"),
                           Text(board.description or "(no description)", style="markdown")]
    ranks = world_size_of(board)
    if ranks:
        blocks.append(Text(
            f"Multi-GPU: every run uses {ranks} GPUs, one process per rank, with torch.distributed ready (NCCL on "
            "GPUs, gloo on the CPU); generate_input gets rank and world_size; a call's time is its slowest rank's.",
            style="hint",
        ))
    cases = "\n".join(str(case) for case in task.get("tests", []))
    blocks.append(Text(f"Tests:\n{cases}\nRanking: {board.ranking_by} of the benchmark medians."))
    blocks.extend(File(name, content.encode(), f"{board.name} task file") for name, content in sorted(files.items()))
    return Reply(blocks)


@command(
    "template",
    "a starting point for a submission",
    LEADERBOARD,
    Param("lang", Kind.TEXT, "template language, e.g. Python, Triton, CUDA"),
)
def template_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.leaderboards.catalog import templates_of
    from kernelcup.core.store.db import session_scope

    with session_scope(app.engine) as session:
        board = _visible_board(session, request)
    templates = templates_of(board)
    if not templates:
        raise NotFound(f"{board.name} ships no template.", f"See `task {board.name}` for the task files.")
    lang = request.args["lang"]
    if lang:
        chosen = {k: v for k, v in templates.items() if k.lower() == str(lang).lower()}
        if not chosen:
            raise NotFound(f"{board.name} has no {lang} template.", f"Templates: {', '.join(templates)}.")
        templates = chosen
    ext = ".cu" if board.lang == "cu" else ".py"
    return Reply(
        [File(f"{board.name}_{lang.lower()}{ext}", source.encode(), f"{lang} template for {board.name}")
         for lang, source in templates.items()]
    )


@command(
    "mine",
    "your own submissions",
    Param("leaderboard", Kind.LEADERBOARD, "only this leaderboard", positional=True),
    Param("limit", Kind.INT, "how many", default=20),
)
def mine_command(app: CommandContext, request: Request) -> Reply:
    from sqlmodel import col, select

    from kernelcup.core.access.users import user_for
    from kernelcup.core.store.db import as_utc, session_scope
    from kernelcup.core.store.models import Job, Leaderboard, Run, Submission

    with session_scope(app.engine) as session:
        user = user_for(session, request.actor)
        query = select(Submission, Leaderboard.name).join(Leaderboard).where(Submission.user_id == user.id)
        if request.args["leaderboard"]:
            board = _visible_board(session, request)
            query = query.where(Submission.leaderboard_id == board.id)
        found = session.exec(query.order_by(col(Submission.id).desc()).limit(max(1, request.args["limit"]))).all()
        if not found:
            return Reply([Text("You have no submissions yet.", style="hint")], ephemeral=True)
        ids = [submission.id for submission, _ in found]
        jobs_of: dict[int, list[Job]] = {}
        for job in session.exec(select(Job).where(col(Job.submission_id).in_(ids)).order_by(col(Job.id))).all():
            jobs_of.setdefault(job.submission_id, []).append(job)
        runs = {run.job_id: run for run in session.exec(select(Run).where(col(Run.submission_id).in_(ids))).all()}
        rows = [
            (f"#{submission.id}", board_name, submission.mode, shown_file_name(submission.file_name),
             f"{as_utc(submission.created_at):%Y-%m-%d %H:%M}",
             ("withdrawn; " if submission.withdrawn_at is not None else "")
             + "; ".join(f"{j.gpu}: {_outcome(j, runs.get(j.id or 0))}" for j in jobs_of.get(submission.id or 0, [])))
            for submission, board_name in found
        ]
    return Reply([Table(("id", "leaderboard", "mode", "file", "submitted (UTC)", "outcome"), tuple(rows),
                        title="Your submissions")], ephemeral=True)


def _withdrawn_words(session: Session, submission: Submission) -> str:
    """Who withdrew it, when, and an admin's reason: shown to those who may still see it."""
    from kernelcup.core.store.db import as_utc
    from kernelcup.core.store.models import User

    assert submission.withdrawn_at is not None
    by = session.get(User, submission.withdrawn_by_id) if submission.withdrawn_by_id is not None else None
    who = "its author" if by is None or by.id == submission.user_id else f"{by.display_name} (admin)"
    reason = f": {submission.withdrawn_reason}" if submission.withdrawn_reason else ""
    return (f"Withdrawn by {who} on {as_utc(submission.withdrawn_at):%Y-%m-%d %H:%M} UTC{reason}. "
            "It counts in no ranking.")


def _outcome(job: Job, run: Run | None) -> str:
    """One job in one's own list: the score where it passed, else why not, in the verdict's
    first line (or the runner's, for a job that ended without a result)."""
    import json

    from kernelcup.core.pipeline.events import job_state
    from kernelcup.core.pipeline.report import format_seconds

    if run is None:
        state = (job_state(job.status) or job.status).replace("_", " ")
        return f"{state}: {_first_line(job.error)}" if job.error else state
    if run.passed:
        return f"passed {format_seconds(run.score)}" if run.score is not None else "passed"
    try:
        verdict = str(json.loads(run.result_json).get("verdict") or "")
    except (ValueError, AttributeError):
        verdict = ""
    return f"failed: {_first_line(verdict)}" if verdict.strip() else "failed"


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


@command(
    "get-submission",
    "a submission's results and code",
    Param("id", Kind.INT, "submission id", required=True, positional=True),
)
def get_submission_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.access.users import user_for
    from kernelcup.core.access.visibility import default_code_public, may_see_submission, sight_of
    from kernelcup.core.pipeline.report import submission_reply
    from kernelcup.core.store.db import session_scope
    from kernelcup.core.store.models import Code, Leaderboard, Submission

    with session_scope(app.engine) as session:
        submission_id = int(request.args["id"])
        submission = session.get(Submission, submission_id)
        user = user_for(session, request.actor)
        if submission is None:
            raise NotFound(f"There is no submission #{submission_id}.", "`mine` lists yours.")
        board = session.get(Leaderboard, submission.leaderboard_id)
        assert board is not None
        if not may_see_submission(submission, board, user_id=user.id, role=request.role):
            raise NotFound(f"There is no submission #{submission_id}.", "`mine` lists yours.")
        # One rule (kernelcup.core.access.visibility) for code and what could echo it: verdicts,
        # messages, logs, profiles.
        sight = sight_of(submission, board, user_id=user.id, role=request.role, now=app.now(),
                         public_after_deadline=default_code_public(app.settings))
        reply = submission_reply(session, submission_id, sight)
        if submission.withdrawn_at is not None:
            reply.blocks.insert(0, Text(_withdrawn_words(session, submission), style="warning"))
        if sight.private:
            code = session.get(Code, submission.code_sha256)
            assert code is not None
            reply.blocks.append(File(shown_file_name(submission.file_name), code.content.encode(),
                                     f"code of #{submission_id}"))
        else:
            reply.blocks.append(Text("The code and logs are private to its author until the deadline.", style="hint"))
        reply.ephemeral = True  # someone's own look-up: never posted to a channel
    reply.ok = True
    return reply


@command(
    "create",
    "a new leaderboard from a task folder (zip or files with task.yml)",
    Param(
        "folder",
        Kind.FOLDER,
        "task.yml, task.py, reference.py, ... (a zip, files, or a path on the bot's own terminal)",
        required=True,
        positional=True,
    ),
    Param("name", Kind.TEXT, "leaderboard name (default: the folder's)"),
    Param("deadline", Kind.WHEN, "e.g. 2026-12-31T23:59Z or +30d", default="+30d"),
    Param("gpu", Kind.GPU, "GPUs it accepts", many=True),
    Param("hidden", Kind.FLAG, "only its creator and admins see it"),
    role=Role.CREATOR,
)
def create_command(app: CommandContext, request: Request) -> Reply:
    from kernelcup.core.access.users import user_for
    from kernelcup.core.leaderboards.catalog import create_leaderboard, leaderboard_gpus
    from kernelcup.core.leaderboards.task_fields import gpus_for_ranks
    from kernelcup.core.leaderboards.tasks import read_task_folder
    from kernelcup.core.store.db import session_scope

    now = app.now()
    deadline = parse_when(str(request.args["deadline"]), now)
    if deadline <= now:
        raise UserError(f"The deadline {show_utc(deadline)} has already passed.", "Give a future time.")
    gpus = request.args["gpu"] or sorted(app.served_gpus())
    unknown = [g for g in gpus if g not in app.settings.gpus]
    if unknown:
        raise UserError(f"Unknown GPU {', '.join(unknown)}.", f"Known GPUs: {', '.join(app.settings.gpus)}.")
    with tempfile.TemporaryDirectory(prefix="kernelcup-create-") as tmp:
        folder, reach = _unpack_folder(request, Path(tmp))
        task = read_task_folder(folder, name=request.args["name"] or None, reach=reach)
        with session_scope(app.engine) as session:
            user = user_for(session, request.actor)
            cards = {name: gpu.count for name, gpu in app.settings.gpus.items()}
            if not request.args["gpu"]:  # the served GPUs: those that can run it
                gpus = gpus_for_ranks(task.task, gpus, cards, task.name) or gpus
            board = create_leaderboard(session, task, deadline=deadline, gpus=gpus, creator_id=user.id, cards=cards,
                                       strict_cpu=bool(request.args["gpu"]))
            if request.args["hidden"]:
                board.visibility = "hidden"
            assert board.id is not None
            opened_on = ", ".join(leaderboard_gpus(session, board.id)) or "none here (it needs a CUDA GPU)"
    app.reschedule(board.id)  # its close, reminders and "opened" announcement
    return Reply([Text(f"Created leaderboard {task.name}: {len(task.task.get('tests', []))} tests, "
                       f"{len(task.task.get('benchmarks', []))} benchmarks, GPUs {opened_on}, "
                       f"closes {show_utc(deadline)}.", style="success")])


@command(
    "delete",
    "delete a leaderboard and everything submitted to it",
    LEADERBOARD,
    Param("yes", Kind.FLAG, "confirm"),
    role=Role.CREATOR,
)
def delete_command(app: CommandContext, request: Request) -> Reply:
    from sqlmodel import select

    from kernelcup.core.access.users import user_for
    from kernelcup.core.leaderboards.catalog import delete_leaderboard
    from kernelcup.core.store.db import in_transaction
    from kernelcup.core.store.models import Submission

    def delete(session: Session) -> tuple[Leaderboard, int, bool]:
        board = _visible_board(session, request)
        user = user_for(session, request.actor)
        if board.creator_id != user.id and not allows(request.role, Role.ADMIN):
            raise Forbidden(f"Only {board.name}'s creator or an admin may delete it.")
        count = len(session.exec(select(Submission.id).where(Submission.leaderboard_id == board.id)).all())
        if request.args["yes"]:
            delete_leaderboard(session, board)
        return board, count, bool(request.args["yes"])

    board, count, deleted = in_transaction(app.engine, delete)
    if not deleted:
        return Reply(
            [Text(f"This deletes {board.name} with its {count} submissions. It cannot be undone.", style="warning"),
             Text(f"Confirm with `delete {board.name} --yes`.", style="hint")],
            ok=False, ephemeral=True,
        )
    app.reschedule(board.id)  # no row left: its jobs go
    return Reply([Text(f"Deleted leaderboard {board.name} and its {count} submissions.", style="success")])


def _visible_board(session: Session, request: Request) -> Leaderboard:
    """The leaderboard named in the request; a hidden one the asker may not see answers as a
    missing one does (kernelcup.core.access.visibility.visible_leaderboard)."""
    from kernelcup.core.access.users import user_for
    from kernelcup.core.access.visibility import visible_leaderboard

    user = user_for(session, request.actor)
    return visible_leaderboard(session, str(request.args["leaderboard"]), user_id=user.id, role=request.role)


def _unpack_folder(request: Request, into: Path) -> tuple[Path, Path]:
    """The task folder from a path (the bot's own terminal only), a zip, or loose files; unpacked
    safely. Also how far its sources may reach: a folder on the operator's own disk, its parent (a
    shared utils.py); an upload, itself. From anywhere else a path is never looked at, so every
    path gets the one answer whether or not it exists."""
    path = request.args.get("folder")
    if request.from_this_machine and not request.attachments and isinstance(path, str) and Path(path).is_dir():
        return Path(path), Path(path).parent
    if not request.attachments:
        raise UserError("Attach the leaderboard's files: a zip, or task.yml, task.py, reference.py, ...",
                        "Only the bot's own terminal reads a folder by its path; the remote CLI sends it zipped.")
    if sum(len(a.content) for a in request.attachments) > MAX_BUNDLE_BYTES:
        raise UserError(f"The files are larger than {MAX_BUNDLE_BYTES // 2**20} MiB together.")
    for attachment in request.attachments:
        if attachment.name.endswith(".zip"):
            try:
                with zipfile.ZipFile(io.BytesIO(attachment.content)) as bundle:
                    _extract(bundle, into)
            except zipfile.BadZipFile as exc:
                raise UserError(f"{attachment.name} is not a readable zip file.") from exc
        else:
            (into / _safe_name(attachment.name)).write_bytes(attachment.content)
    found = sorted(into.rglob("task.yml"), key=lambda p: len(p.parts))
    if not found:
        raise UserError("There is no task.yml among the files.", "A leaderboard folder needs task.yml.")
    return found[0].parent, found[0].parent


def _extract(bundle: zipfile.ZipFile, into: Path) -> None:
    total = 0
    for info in bundle.infolist():
        total += info.file_size
        if total > MAX_BUNDLE_BYTES:
            raise UserError(f"The zip unpacks to more than {MAX_BUNDLE_BYTES // 2**20} MiB.")
        parts = PurePosixPath(info.filename).parts
        if info.is_dir() or not parts or ".." in parts or parts[0].startswith("/"):
            continue
        target = into.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(bundle.read(info))


def _safe_name(name: str) -> str:
    base = PurePosixPath(name.replace("\\", "/")).name
    if not base or base in (".", ".."):
        raise UserError(f"{name!r} is not a usable file name.")
    return base

