"""Leaderboards: finding one by name, creating one from a task folder, syncing a folder of them."""

from __future__ import annotations

import difflib
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, delete, select

from kernelcup.core.errors import NotFound, UserError
from kernelcup.core.leaderboards import task_fields
from kernelcup.core.leaderboards.devices import cuda_reason, runs_on
from kernelcup.core.leaderboards.problem_sets import find_task_folders
from kernelcup.core.leaderboards.task_fields import gpus_for_ranks, nvidia_gpus, refuse_unsupported
from kernelcup.core.leaderboards.tasks import DEFAULT_RANKING, TaskFolder, read_task_folder
from kernelcup.core.store.models import Leaderboard, LeaderboardFile, LeaderboardGpu

TEMPLATES_KEY = "x-kernelcup-templates"  # kept beside the parsed task; never sent to the harness


def get_leaderboard(session: Session, name: str, *, include_hidden: bool = True) -> Leaderboard:
    board = session.exec(select(Leaderboard).where(Leaderboard.name == name)).first()
    if board is not None and (include_hidden or board.visibility == "public"):
        return board
    raise missing_leaderboard(session, name)


def missing_leaderboard(session: Session, name: str) -> NotFound:
    """The refusal for a name that names no leaderboard, and for one the asker may not see: the
    same words, so a hidden leaderboard's existence is never revealed."""
    # The hint names public leaderboards only: a hidden one is never revealed by a typo.
    names = list(session.exec(select(Leaderboard.name).where(Leaderboard.visibility == "public")).all())
    closest = difflib.get_close_matches(name, names, n=1)
    hint = f"Did you mean {closest[0]}? " if closest else ""
    hint += f"Leaderboards: {', '.join(sorted(names))}." if names else "There are no leaderboards yet."
    return NotFound(f"There is no leaderboard {name!r}.", hint)


def has_leaderboards(session: Session) -> bool:
    """False on a fresh store, before the first sync."""
    return session.exec(select(Leaderboard.id)).first() is not None


def leaderboard_gpus(session: Session, board_id: int) -> list[str]:
    rows = session.exec(select(LeaderboardGpu.gpu).where(LeaderboardGpu.leaderboard_id == board_id))
    return sorted(rows.all())


def runnable_gpus(session: Session, board: Leaderboard) -> list[str]:
    """The GPUs a leaderboard runs on here: those it opened on, less the CPU where it needs CUDA
    (a leaderboard stored before that was known may list the CPU)."""
    assert board.id is not None
    return runs_on(leaderboard_gpus(session, board.id), board.needs_cuda)


def declared_gpus(board: Leaderboard) -> list[str]:
    """The GPUs its task.yml names (where it could run elsewhere)."""
    return [str(g) for g in task_of(board).get("gpus") or []]


def cuda_words(board: Leaderboard) -> str | None:
    """Why a leaderboard needs CUDA, in a few words; None where it runs on the CPU too."""
    if not board.needs_cuda:
        return None
    return "CUDA source" if board.lang == "cu" else "its inputs are made on cuda"


def task_of(board: Leaderboard) -> dict[str, Any]:
    task: dict[str, Any] = json.loads(board.task_json)
    return task


def world_size_of(board: Leaderboard) -> int:
    """The ranks (GPUs) every run of a multi-GPU leaderboard uses; 0 for a single-GPU one."""
    return task_fields.world_size(task_of(board))


def multi_gpu_note(board: Leaderboard) -> str:
    """``"multi-GPU, 2 GPUs per run"`` for a multi-GPU leaderboard, else ``""``."""
    ranks = world_size_of(board)
    return f"multi-GPU, {ranks} GPU{'s' if ranks != 1 else ''} per run" if ranks else ""


def templates_of(board: Leaderboard) -> dict[str, str]:
    return dict(task_of(board).get(TEMPLATES_KEY, {}))


def task_files(session: Session, board_id: int) -> dict[str, str]:
    rows = session.exec(select(LeaderboardFile).where(LeaderboardFile.leaderboard_id == board_id))
    return {row.name: row.content for row in rows.all()}


def new_secret_seed() -> int:
    # 62 bits: fits a signed 64-bit column on every database.
    return secrets.randbits(62)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


def check_name(name: str) -> None:
    """Leaderboard names go into URLs, file names and chat: letters, digits, ``_`` and ``-``."""
    if not NAME.fullmatch(name):
        raise UserError(
            f"{name[:80]!r} cannot be a leaderboard name.",
            "Use 1-64 letters, digits, '_' or '-', starting with a letter or digit (e.g. vectoradd_v2).",
        )


def create_leaderboard(
    session: Session,
    folder: TaskFolder,
    *,
    deadline: datetime,
    gpus: list[str],
    creator_id: int | None = None,
    source_dir: str | None = None,
    cards: Mapping[str, int] | None = None,
    declared_gpus: list[str] | None = None,
    strict_cpu: bool = False,
) -> Leaderboard:
    """``cards``: each GPU's card count (the registry's ``count``); given, every GPU must be able
    to run the leaderboard's ranks (a multi-GPU leaderboard's ``world_size``). ``declared_gpus``:
    the GPUs a GPU MODE problem set names for it, where task.yml names none.

    A leaderboard that needs CUDA (``kernelcup.core.leaderboards.devices``) never opens on the
    CPU: named by a creator, the CPU is refused; where that leaves no GPU, it opens on none here
    (``list`` says so and ``submit`` refuses before queuing)."""
    check_name(folder.name)
    why_cuda = cuda_reason(folder.task, folder.files, declared_gpus or None)
    if why_cuda and "cpu" in gpus:
        if strict_cpu:
            raise UserError(f"{folder.name} needs a CUDA GPU ({why_cuda}): it cannot run on cpu.",
                            "Name the GPUs it runs on, or none for those served here.")
        gpus = runs_on(gpus, True)
    if cards is not None and gpus:
        gpus = gpus_for_ranks(folder.task, gpus, cards, folder.name, strict=True)
    if deadline.tzinfo is None:
        raise UserError("A deadline needs a time zone.", "Write it like 2026-12-31T23:59Z.")
    if not gpus and not why_cuda:
        raise UserError(f"Leaderboard {folder.name} would accept no GPU.", "Name at least one GPU.")
    if session.exec(select(Leaderboard.id).where(Leaderboard.name == folder.name)).first() is not None:
        raise UserError(f"A leaderboard named {folder.name!r} already exists.", "Pick another name.")
    board = Leaderboard(
        name=folder.name,
        description=folder.description,
        lang=folder.lang,
        deadline=deadline,
        ranking_by=str(folder.task.get("ranking_by", DEFAULT_RANKING)),
        task_json=_task_json(folder),
        secret_seed=new_secret_seed(),
        source_dir=source_dir,
        creator_id=creator_id,
        needs_cuda=why_cuda is not None,
    )
    session.add(board)
    session.flush()
    assert board.id is not None
    _replace_files(session, board.id, folder.files)
    for gpu in sorted(set(gpus)):
        session.add(LeaderboardGpu(leaderboard_id=board.id, gpu=gpu))
    return board


def update_from_folder(session: Session, board: Leaderboard, folder: TaskFolder,
                       declared_gpus: list[str] | None = None) -> bool:
    """Refresh a leaderboard's task from its folder; True when anything changed."""
    assert board.id is not None
    task_json = _task_json(folder)
    needs_cuda = cuda_reason(folder.task, folder.files, declared_gpus or None) is not None
    if task_json == board.task_json and task_files(session, board.id) == folder.files \
            and needs_cuda == board.needs_cuda:
        return False
    board.needs_cuda = needs_cuda
    board.task_json = task_json
    board.description = folder.description
    board.lang = folder.lang
    board.ranking_by = str(folder.task.get("ranking_by", DEFAULT_RANKING))
    session.add(board)
    _replace_files(session, board.id, folder.files)
    return True


def delete_leaderboard(session: Session, board: Leaderboard) -> None:
    session.delete(board)  # files, GPUs, submissions, jobs and runs go with it (ON DELETE CASCADE)


@dataclass
class SyncReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)  # of those created: past their deadline already
    errors: dict[str, str] = field(default_factory=dict)
    folders: dict[str, Path] = field(default_factory=dict)  # each leaderboard found: its folder


NO_GPU_SERVED = ("no runner serves a GPU here, so the leaderboard cannot open: check the GPU registry (gpus: in "
                 "the config) and the log for why each runner serves none")


def sync_folder(
    session: Session,
    root: Path,
    *,
    served_gpus: list[str],
    now: datetime,
    default_days: int,
    cards: Mapping[str, int] | None = None,
    owner: Path | None = None,
    levels: int = 2,
) -> SyncReport:
    """Every leaderboard folder under ``root`` becomes (or refreshes) a leaderboard of its name:
    kernelcup's layout or GPU MODE's problem sets (``kernelcup.core.leaderboards.problem_sets``),
    found one to ``levels`` folders down.

    New leaderboards open on the GPUs a runner serves now that task.yml (or the problem set)
    allows, or all of them when it names none (e.g. the local GPU or ``cpu``). A folder that
    cannot be read or run here is reported with its reason; the others still load. ``cards``
    (each GPU's card count) keeps a multi-GPU leaderboard to GPU entries with enough cards and a
    single-GPU one to single cards, and refuses one that fits none. Given ``owner`` (a problems
    repository's folder: ``kernelcup.core.leaderboards.sources``), a leaderboard of the same name
    that came from elsewhere is left alone and reported, never overwritten by another source's.
    """
    report = SyncReport()
    if not root.is_dir():
        report.errors[str(root)] = (f"there is no folder {root.resolve()} (set leaderboards_dir, or "
                                    "KERNELCUP_LEADERBOARDS_DIR)")
        return report
    found, report.errors = find_task_folders(root, levels)
    for entry in found:
        report.folders[entry.name] = entry.folder
        try:
            # The operator's own folder: a source may reach anything in it (GPU MODE's problem sets
            # share ../utils.py, and linalg's reach ../../pmpp_v2/utils.py), nothing outside it.
            task = read_task_folder(entry.folder, name=entry.name, reach=root)
            if entry.gpus:
                refuse_unsupported({**task.task, "gpus": entry.gpus}, where=f"{entry.name}'s problem set")
        except (UserError, OSError, UnicodeDecodeError) as exc:
            report.errors[entry.name] = _one_line(getattr(exc, "message", str(exc)))
            continue
        existing = session.exec(select(Leaderboard).where(Leaderboard.name == task.name)).first()
        if existing is None:
            if not served_gpus:
                report.errors[entry.name] = NO_GPU_SERVED
                continue
            wanted = nvidia_gpus(entry.gpus or [str(g) for g in task.task.get("gpus") or []])
            gpus = [g for g in served_gpus if not wanted or g in wanted or g == "cpu"]
            try:
                gpus = gpus or served_gpus
                if cards is not None:
                    gpus = gpus_for_ranks(task.task, gpus, cards, task.name) or gpus
                deadline = (
                    parse_deadline(entry.deadline, f"{entry.name}'s problem set")
                    or parse_deadline(task.task.get("deadline"), f"{entry.name}'s task.yml")
                    or now + timedelta(days=default_days)
                )
                board = create_leaderboard(session, task, deadline=deadline, gpus=gpus,
                                           source_dir=str(entry.folder), cards=cards, declared_gpus=entry.gpus)
                if deadline <= now:
                    # A problem whose competition has ended (GPU MODE's sets keep them) opens
                    # closed: nothing to announce and no entries to re-run; set-deadline reopens it.
                    board.closed_at = board.final_queued_at = board.final_done_at = now
                    report.closed.append(task.name)
            except (UserError, ValueError) as exc:
                report.errors[entry.name] = _one_line(getattr(exc, "message", str(exc)))
                continue
            report.created.append(task.name)
        elif owner is not None and not _comes_from(existing, owner):
            report.errors[entry.name] = (
                f"a leaderboard {task.name!r} already exists from {existing.source_dir or 'an upload'}: left as "
                "it is (rename the problem's folder, or its name in the problem set, to load it beside)")
        elif update_from_folder(session, existing, task, entry.gpus) | _open_where_it_runs_now(
                session, existing, task.task, served_gpus, entry.gpus, cards):
            report.updated.append(task.name)
        else:
            report.unchanged.append(task.name)
    return report


def _open_where_it_runs_now(session: Session, board: Leaderboard, task: dict[str, Any], served_gpus: list[str],
                            set_gpus: list[str], cards: Mapping[str, int] | None) -> bool:
    """A leaderboard that runs on none of its GPUs here (one that needs CUDA, synced where only
    the CPU was served) opens on the GPUs served now that can run it, as a new one would (those
    its task or problem set names where any is served); True when it did."""
    if runnable_gpus(session, board):
        return False
    wanted = nvidia_gpus(set_gpus or [str(g) for g in task.get("gpus") or []])
    capable = runs_on(served_gpus, board.needs_cuda)
    gpus = [g for g in capable if g in wanted] or capable
    if cards is not None and gpus:
        try:
            gpus = gpus_for_ranks(task, gpus, cards, board.name)
        except UserError:
            return False
    known = set(leaderboard_gpus(session, board.id or 0))
    added = [gpu for gpu in gpus if gpu not in known]
    session.add_all(LeaderboardGpu(leaderboard_id=board.id or 0, gpu=gpu) for gpu in added)
    return bool(added)


def _comes_from(board: Leaderboard, owner: Path) -> bool:
    """Whether ``board`` was synced from a folder inside ``owner`` (a relative source folder is
    relative to the working folder, as ``leaderboards_dir`` is)."""
    return board.source_dir is not None and Path(board.source_dir).resolve().is_relative_to(owner.resolve())


def _one_line(message: str) -> str:
    return " ".join(message.split())


def parse_deadline(raw: object, where: str) -> datetime | None:
    """A deadline as task.yml or a GPU MODE problem set writes it: a date, or a date and time
    (``2026-03-15``, ``2025-11-29 6:59``, ``2026-12-31T23:59Z``), read as UTC where it names no
    zone and as the start of the day where it names no time; None where it is empty or absent."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, datetime):
        return raw if raw.tzinfo else raw.replace(tzinfo=UTC)
    if isinstance(raw, date):
        return datetime.combine(raw, time(0), tzinfo=UTC)
    text = re.sub(r"(?<=[ T])(\d)(?=:)", r"0\1", str(raw).strip())  # GPU MODE writes "6:59"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise UserError(f"{where}: the deadline {str(raw)[:60]!r} is not a date; write it like 2026-12-31, "
                        "2026-12-31 23:59 or 2026-12-31T23:59Z (UTC where no zone is given)") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _task_json(folder: TaskFolder) -> str:
    return json.dumps({**folder.task, TEMPLATES_KEY: folder.templates}, sort_keys=True, default=str)


def _replace_files(session: Session, board_id: int, files: dict[str, str]) -> None:
    session.exec(delete(LeaderboardFile).where(col(LeaderboardFile.leaderboard_id) == board_id))
    for name, content in sorted(files.items()):
        session.add(LeaderboardFile(leaderboard_id=board_id, name=name, content=content))
