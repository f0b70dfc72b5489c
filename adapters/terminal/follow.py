"""Following a submission live in a terminal: a Rich progress bar per job, then the report."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from kernelcup.core.messages import Reply
from kernelcup.core.pipeline.events import JobEvent, job_state

if TYPE_CHECKING:  # the hand-off path follows a server's submission without the core itself
    from kernelcup.core.app import Kernelcup


def describe(event: JobEvent) -> str:
    if event.finished:  # the job's fate; the verdict comes in the report
        shown = job_state(event.status) or event.phase
        return f"[{event.gpu}] {shown.replace('_', ' ')}"
    if event.phase == "queued" and event.queue_position is not None:
        return f"[{event.gpu}] queued, position {event.queue_position}"
    return f"[{event.gpu}] {event.phase}"


async def follow_submission(app: Kernelcup, submission_id: int, console: Console) -> Reply:
    """Show progress until every job of the submission has finished; return the final report."""
    await show_progress(app.follow(submission_id), console)
    return await app.submission_report(submission_id)


async def show_progress(events: AsyncIterator[JobEvent], console: Console) -> None:
    """A Rich progress bar per job, fed by job events from the core or from a server (remote)."""
    # markup=False: a GPU name in brackets, "[cpu]", is text, not a Rich style tag.
    columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        tasks: dict[int, TaskID] = {}
        async for event in events:
            if event.job_id not in tasks:
                tasks[event.job_id] = progress.add_task(describe(event), total=None)
            task = tasks[event.job_id]
            total = event.total or None
            progress.update(task, description=describe(event), total=total, completed=event.done)
            if event.finished:
                progress.update(task, total=1, completed=1)
