"""Deadlines on a clock: APScheduler 3 closes leaderboards, sends reminders and announcements, and
drives the final standings.

The leaderboard rows are the source of truth (``kernelcup.core.scheduling.deadlines``); APScheduler's jobs, kept in each
process's memory, only say when to look at them. Nothing is stored or unpickled from the database:
a job store there would run whatever anyone who can write its table put in it. The jobs are
rebuilt from the rows at start, after every command that changes a leaderboard, and every few
minutes (edits made by another process), under stable ids with ``replace_existing``: an edited
deadline, a deleted leaderboard or a restart never leaves a stale or duplicate job. Every job
function re-reads the row and acts through a claim, so a job that fires twice, late, or in two
processes at once acts once.

Misfires: after downtime, a deadline missed by at most ``misfire_grace`` closes once when the bot
is back, with its final standings; one missed by more is left to an admin (``set-deadline``)
rather than announced days late. A reminder more than ``reminder_grace`` late is skipped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog
from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger

from kernelcup.core.messages import Reply
from kernelcup.core.scheduling.announcements import Announcement, Announcements, Occasion
from kernelcup.core.scheduling.deadlines import BoardState, board_states, claim_close, claim_opened, claim_reminder
from kernelcup.core.scheduling.notices import closed_reply, final_standings_reply, opened_reply, reminder_reply
from kernelcup.core.scheduling.schedule_config import ScheduleConfig
from kernelcup.core.scheduling.standings_final import advance
from kernelcup.core.store.db import session_scope

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from kernelcup.core.config import Settings

log = structlog.get_logger("kernelcup.scheduling")

# Job functions are named by reference, as text: the schedule never holds a pickled function.
CLOSE = "kernelcup.core.scheduling.scheduler:close_leaderboard"
REMIND = "kernelcup.core.scheduling.scheduler:send_reminder"
OPENED = "kernelcup.core.scheduling.scheduler:announce_opened"
RECONCILE = "kernelcup.core.scheduling.scheduler:reconcile"
RECONCILE_ID = "kernelcup:reconcile"


def job_prefix(board_id: int) -> str:
    return f"leaderboard:{board_id}:"


_OWNER: ContextVar[Scheduling] = ContextVar("kernelcup_scheduling")


class _OwnedExecutor(AsyncIOExecutor):  # type: ignore[misc]
    """Runs a job as a task that knows which ``Scheduling`` fired it (one process may hold two
    apps, as the tests do): the task copies the context that is current when it is created."""

    def __init__(self, owner: Scheduling) -> None:
        super().__init__()
        self._owner = owner

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        token = _OWNER.set(self._owner)
        try:
            super()._do_submit_job(job, run_times)
        finally:
            _OWNER.reset(token)

    def running(self, job_id: str) -> bool:
        """A run of this job was handed out and has not ended (APScheduler counts it until the
        task finishes, and refuses a second one with a "maximum number of running instances"
        warning)."""
        if self._lock is None:  # not started: nothing was handed out
            return False
        with self._lock:
            return bool(self._instances.get(job_id, 0))


def _owner() -> Scheduling:
    try:
        return _OWNER.get()
    except LookupError:
        raise RuntimeError("scheduled jobs run only through Scheduling's executor") from None


async def close_leaderboard(board_id: int) -> None:
    await _owner().close(board_id)


async def send_reminder(board_id: int, before_s: int) -> None:
    await _owner().remind(board_id, before_s)


async def announce_opened(board_id: int) -> None:
    await _owner().opened(board_id)


async def reconcile() -> None:
    await _owner().reconcile()


# --- what a leaderboard needs -----------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    func: str
    run_at: datetime
    args: tuple[int, ...]
    grace: timedelta  # APScheduler's misfire grace; the job function checks again


def plan(state: BoardState, config: ScheduleConfig, now: datetime) -> dict[str, Planned]:
    """The jobs a leaderboard needs now, from its row alone (the final standings are driven by
    a task, not a job: see ``Scheduling.drive_final``)."""
    prefix, jobs = job_prefix(state.id), {}
    if state.closed:
        return {}
    if state.deadline > now:
        jobs[prefix + "close"] = Planned(CLOSE, state.deadline, (state.id,), config.misfire_grace)
        if not state.opened_announced:
            jobs[prefix + "opened"] = Planned(OPENED, now, (state.id,), config.misfire_grace)
        for before in config.reminders:
            due, before_s = state.deadline - before, int(before.total_seconds())
            if before_s in state.reminders_sent or due + config.reminder_grace < now or due <= state.created_at:
                continue  # sent; long past (never sent late); or due before the board opened (its
                # "opened" announcement already gave the deadline)
            jobs[f"{prefix}remind:{before_s}"] = Planned(REMIND, max(due, now), (state.id, before_s),
                                                         config.reminder_grace)
    elif now - state.deadline <= config.misfire_grace:
        jobs[prefix + "close"] = Planned(CLOSE, now, (state.id,), config.misfire_grace)  # missed while down
    return jobs


def _unchanged(current: Any, planned: Planned, now: datetime) -> bool:
    """The stored job already runs this function at that time (or both times are due now)."""
    if current is None or current.next_run_time is None or tuple(current.args) != planned.args:
        return False
    return bool(current.next_run_time == planned.run_at or max(current.next_run_time, planned.run_at) <= now)


class Scheduling:
    """The scheduler of one bot process; ``Kernelcup.start`` starts it, ``stop`` stops it."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        announcements: Announcements,
        *,
        clock: Callable[[], datetime],
        wake_pipeline: Callable[[], None],  # final standings queued re-runs: the workers take them now
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.announcements = announcements
        self.clock = clock
        self.wake_pipeline = wake_pipeline
        self.config = ScheduleConfig.from_settings(settings)
        self.store = MemoryJobStore()
        self.executor = _OwnedExecutor(self)
        self.scheduler = AsyncIOScheduler(
            timezone=UTC,
            jobstores={"default": self.store},
            executors={"default": self.executor},
            job_defaults={"coalesce": True, "max_instances": 1},
        )
        self._tasks: set[asyncio.Task[None]] = set()
        self._drivers: dict[int, asyncio.Task[None]] = {}  # board id -> its final standings' driver
        self._resume: asyncio.TimerHandle | None = None
        self._missed: set[int] = set()  # boards already logged as missed beyond the grace
        # One rebuild at a time here, each reading the rows inside: the newest rows always win.
        self._rebuilding = threading.Lock()

    # -- life cycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Rebuild the jobs from the rows, then run them after ``start_delay``: announcements
        made at start (a deadline missed while down) must find the adapters registered."""
        self.scheduler.start(paused=True)
        await asyncio.to_thread(self.rebuild)
        every = max(1.0, self.config.reconcile.total_seconds())
        await asyncio.to_thread(
            self.scheduler.add_job, RECONCILE, IntervalTrigger(seconds=every, timezone=UTC),
            id=RECONCILE_ID, name="rebuild jobs from the leaderboards", replace_existing=True,
            misfire_grace_time=None,
        )
        delay = self.config.start_delay.total_seconds()
        self._resume = asyncio.get_running_loop().call_later(delay, self._go)
        reminders = [f"{r.total_seconds() / 3600:g}h" for r in self.config.reminders]
        log.info("scheduler started", reminders=reminders, resume_in_s=delay)

    def _go(self) -> None:
        self._resume = None
        if self.scheduler.running:
            self.scheduler.resume()
            self._spawn(self._first_pass())

    async def _first_pass(self) -> None:
        await self.reconcile()
        log.info("scheduler resumed", jobs=len(self.scheduler.get_jobs()))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def stop(self) -> None:
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
            for _ in range(10):  # AsyncIOScheduler shuts down on the loop's next turn
                if not self.scheduler.running:
                    break
                await asyncio.sleep(0)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._drivers.clear()

    def wakeup(self) -> None:
        """Look for due jobs now (tests move the clock, then call this)."""
        self.scheduler.wakeup()

    # -- keeping the jobs in line with the rows ---------------------------------------------------

    def reschedule(self, board_id: int | None = None) -> None:
        """After a command changed a leaderboard (from any thread). Without a running scheduler
        (the one-shot CLI) nothing happens here: the serving process's next reconcile sees it."""
        if not self.scheduler.running:
            return
        try:
            self.rebuild(board_id)
        except Exception:
            log.exception("rescheduling failed; the next reconcile retries", leaderboard_id=board_id)

    def rebuild(self, board_id: int | None = None) -> list[int]:
        """Make the stored jobs match the rows (of every board, or one). Returns the closed boards
        whose final standings are not done yet."""
        with self._rebuilding:
            return self._rebuild(board_id)

    def _rebuild(self, board_id: int | None) -> list[int]:
        now = self.clock()
        with session_scope(self.engine) as session:
            states = board_states(session, board_id)
        desired: dict[str, Planned] = {}
        for state in states:
            desired.update(plan(state, self.config, now))
            if not state.closed and now - state.deadline > self.config.misfire_grace and state.id not in self._missed:
                self._missed.add(state.id)
                log.warning("deadline passed beyond the misfire grace (bot down?): not closed automatically; "
                            "set-deadline runs the close and final standings", leaderboard=state.name)
        prefix = "leaderboard:" if board_id is None else job_prefix(board_id)
        existing = {job.id: job for job in self.scheduler.get_jobs() if job.id.startswith(prefix)}
        for job_id in existing.keys() - desired.keys():
            self.scheduler.remove_job(job_id)
        for job_id, planned in desired.items():
            if _unchanged(existing.get(job_id), planned, now):
                continue  # don't rewrite the row every few minutes
            if job_id not in existing and self.executor.running(job_id):
                # A date job leaves the store when its run is handed out, before that run has
                # claimed its row: planned again now, APScheduler would refuse the copy ("skipped:
                # maximum number of running instances"). The run in flight re-reads the row.
                continue
            self.scheduler.add_job(
                planned.func, DateTrigger(run_date=planned.run_at, timezone=UTC), args=planned.args,
                id=job_id, name=job_id, replace_existing=True,
                misfire_grace_time=max(1, int(planned.grace.total_seconds())),
            )
        return [state.id for state in states if state.closed and not state.final_done]

    async def reconcile(self) -> None:
        pending = await asyncio.to_thread(self.rebuild)
        for board_id in pending:
            self.drive_final(board_id)

    # -- the jobs --------------------------------------------------------------------------------

    async def close(self, board_id: int) -> None:
        now = self.clock()
        state = await asyncio.to_thread(claim_close, self.engine, board_id, now, self.config.misfire_grace)
        await asyncio.to_thread(self.rebuild, board_id)  # drops its reminders; re-plans a moved deadline
        if state is None:
            return
        log.info("leaderboard closed", leaderboard=state.name, deadline=state.deadline.isoformat())
        reply = closed_reply(state.name, state.deadline, self.config.final_top_n, self.config.final_rounds)
        await self._publish(state.name, state.public, Occasion.CLOSED, reply)
        self.drive_final(board_id)

    async def remind(self, board_id: int, before_s: int) -> None:
        now = self.clock()
        state = await asyncio.to_thread(claim_reminder, self.engine, board_id, timedelta(seconds=before_s), now,
                                        self.config.reminder_grace)
        if state is None:
            await asyncio.to_thread(self.rebuild, board_id)
            return
        reply = reminder_reply(state.name, state.deadline, now)
        await self._publish(state.name, state.public, Occasion.REMINDER, reply)

    async def opened(self, board_id: int) -> None:
        now = self.clock()
        state = await asyncio.to_thread(claim_opened, self.engine, board_id, now)
        if state is not None:
            reply = opened_reply(state.name, state.gpus, state.deadline, now)
            await self._publish(state.name, state.public, Occasion.OPENED, reply)

    def drive_final(self, board_id: int) -> None:
        """Advance a closed board's final standings until announced (on the event loop)."""
        running = self._drivers.get(board_id)
        if running is None or running.done():
            self._drivers[board_id] = self._spawn(self._drive_final(board_id))

    async def _drive_final(self, board_id: int) -> None:
        config = self.config
        while True:
            try:
                step = await asyncio.to_thread(advance, self.engine, self.settings, board_id, self.clock(),
                                               config.final_top_n, config.final_rounds)
            except Exception:
                log.exception("final standings step failed; retrying", leaderboard_id=board_id)
            else:
                if step.queued_jobs:
                    log.info("final standings re-runs queued", leaderboard_id=board_id, jobs=step.queued_jobs)
                    self.wake_pipeline()
                if step.rows is not None:
                    reply = final_standings_reply(step.name, step.rows, config.final_top_n, config.final_rounds)
                    await self._publish(step.name, step.public, Occasion.FINAL_STANDINGS, reply)
                if step.done:
                    return
            await asyncio.sleep(config.final_poll.total_seconds())

    async def _publish(self, name: str, public: bool, occasion: Occasion, reply: Reply) -> None:
        if not public:
            log.info("not announced: the leaderboard is hidden", leaderboard=name, occasion=occasion.value)
            return
        delivered = await self.announcements.publish(Announcement(name, occasion, reply))
        log.info("announced", leaderboard=name, occasion=occasion.value, platforms=delivered)
