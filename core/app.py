"""The core as one object that every adapter talks to: ``await app.handle(request) -> Reply``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from kernelcup.core.access.membership import admit_by_role
from kernelcup.core.access.permissions import allows, role_of
from kernelcup.core.access.visibility import EVERYTHING, Sight
from kernelcup.core.charts import charts_on, history_images
from kernelcup.core.charts.plots import HistoryPlot, submission_history_plots
from kernelcup.core.commands.catalog import find_command
from kernelcup.core.commands.completion import complete
from kernelcup.core.commands.registry import Kind, coerce_args
from kernelcup.core.config import Settings
from kernelcup.core.errors import UserError
from kernelcup.core.leaderboards.catalog import SyncReport, has_leaderboards, sync_folder
from kernelcup.core.leaderboards.problem_sets import FOLDER_LEVELS
from kernelcup.core.leaderboards.ranking import RankChange
from kernelcup.core.messages import Refusal, Reply, Request
from kernelcup.core.pipeline.events import JobEvent
from kernelcup.core.pipeline.jobs import Pipeline
from kernelcup.core.pipeline.report import submission_reply
from kernelcup.core.pipeline.runner import Runner, runners_by_gpu
from kernelcup.core.pipeline.submissions import NeedsChoice
from kernelcup.core.scheduling.announcements import Announcements
from kernelcup.core.scheduling.notices import new_leader_announcement
from kernelcup.core.scheduling.scheduler import Scheduling
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard, Run, utcnow

if TYPE_CHECKING:
    from kernelcup.core.leaderboards.sources import Source

log = structlog.get_logger("kernelcup.app")


class Kernelcup:
    def __init__(
        self,
        settings: Settings,
        engine: Engine,
        # A mapping, or a function that builds it when a command first needs a runner: the
        # terminal's `list` then never imports a runner's SDK or asks nvidia-smi for the GPU.
        runners: Mapping[str, Runner] | Callable[[], Mapping[str, Runner]],
        *,
        clock: Callable[[], datetime] = utcnow,
        scheduler: bool = True,  # off: no deadlines, reminders or final standings run here
    ) -> None:
        self.settings = settings
        self.engine = engine
        self._runners: dict[str, Runner] | None = dict(runners) if isinstance(runners, Mapping) else None
        self._load_runners = runners if callable(runners) else None
        self.clock = clock
        self.announcements = Announcements(settings)
        self.scheduling = Scheduling(engine, settings, self.announcements, clock=clock,
                                     wake_pipeline=lambda: self.pipeline.wake()) if scheduler else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._announcing: set[asyncio.Task[None]] = set()

    @property
    def runners(self) -> dict[str, Runner]:
        if self._runners is None:
            assert self._load_runners is not None
            self._runners = dict(self._load_runners())
        return self._runners

    @cached_property
    def pipeline(self) -> Pipeline:
        """The workers, built with the runners the first time a command or a start needs them."""
        return Pipeline(self.engine, self.settings, self._runner_by_gpu(), clock=self.clock,
                        on_rank_change=self._on_rank_change)

    def now(self) -> datetime:
        return self.clock()

    def served_gpus(self) -> set[str]:
        """GPUs that some configured runner can take now (the registry says which runner)."""
        return set(self._runner_by_gpu())

    def _runner_by_gpu(self) -> dict[str, Runner]:
        return runners_by_gpu(self.settings, self.runners)

    def runner_states(self) -> tuple[dict[str, list[str]], dict[str, str]]:
        """Each runner the GPU registry names: the GPUs it serves here (on), or why it serves
        none (off), for the start's summary line."""
        served: dict[str, list[str]] = {}
        for gpu, runner in sorted(self._runner_by_gpu().items()):
            served.setdefault(runner.name, []).append(gpu)
        on: dict[str, list[str]] = {}
        off: dict[str, str] = {}
        for name in dict.fromkeys(gpu.runner for gpu in self.settings.gpus.values()):
            found = self.runners.get(name)
            if name in served:
                on[name] = served[name]
            elif found is None:
                off[name] = "not installed"
            else:
                reason = getattr(found, "off_reason", None)
                off[name] = reason() if callable(reason) else "serves no GPU here"
        return on, off

    async def start(self) -> None:
        """Ready to serve: the shipped leaderboards on a fresh install, the workers, the schedule."""
        await asyncio.to_thread(self.sync_if_empty)
        await self._each_runner("start")
        await self.pipeline.start()
        if self.scheduling is not None:
            await self.scheduling.start()

    async def start_for_one_submission(self) -> None:
        """The terminal's ``submit``: workers for the one submission this process runs, then exits.

        Runners start with ``one_shot`` (the local runner's standby harness starts now, beside the
        command's own work, and none is started after the job for a next one that never comes);
        no scheduler."""
        await self._each_runner("start", one_shot=True)
        await self.pipeline.start()

    async def stop(self, drain_s: float = 10.0) -> None:
        """Stop serving; running jobs get ``drain_s`` to finish, then go back to the queue."""
        if self.scheduling is not None:
            await self.scheduling.stop()
        if "pipeline" in self.__dict__:  # built (cached_property): else no worker ever ran here
            await self.pipeline.stop(drain_s)
        if self._runners is not None:
            await self._each_runner("aclose")
        if self._announcing:
            await asyncio.wait(list(self._announcing), timeout=10)

    async def _each_runner(self, hook: str, **options: bool) -> None:
        """A runner's optional ``start``/``aclose`` (the local runner's standby harness)."""
        for runner in self.runners.values():
            method = getattr(runner, hook, None)
            if method is not None:
                await method(**options)

    def reschedule(self, board_id: int | None = None) -> None:
        """A command changed a leaderboard (or all, ``None``): its deadline jobs follow the row."""
        if self.scheduling is not None:
            self.scheduling.reschedule(board_id)

    async def _on_rank_change(self, run: Run, change: RankChange) -> None:
        """From the pipeline, after a ranked run improved its entry: announce a new #1, without
        holding up the worker that stored the run."""
        if change.is_new_leader:
            task = asyncio.create_task(self._announce_new_leader(run, change))
            self._announcing.add(task)
            task.add_done_callback(self._announcing.discard)

    async def _announce_new_leader(self, run: Run, change: RankChange) -> None:
        announcement = await asyncio.to_thread(new_leader_announcement, self.engine, run, change)
        if announcement is not None:
            await self.announcements.publish(announcement)

    def sync_if_empty(self) -> SyncReport | None:
        """On a fresh store, every leaderboard folder; ``None`` when there were leaderboards.

        The leaderboards loaded here are not announced as opened: "Leaderboard X is open" is
        news only for one a person's command creates (``create``, ``admin sync``) while the bot
        serves. What a first start loads on its own is its starting state, which the start's
        summary line and ``list`` show (``kernelcup.core.scheduling.scheduler.plan`` announces
        every leaderboard whose ``opened_announced_at`` is empty)."""
        with session_scope(self.engine) as session:
            if has_leaderboards(session):
                return None
            report = self.sync_leaderboards(session)
            if report.created:
                session.execute(
                    update(Leaderboard)
                    .where(col(Leaderboard.name).in_(report.created), col(Leaderboard.opened_announced_at).is_(None))
                    .values(opened_announced_at=self.now())
                )
        (log.warning if report.errors else log.info)("leaderboards synced", created=report.created,
                                                      closed=report.closed, errors=report.errors)
        return report

    def sync_leaderboards(self, session: Session, source: Source | None = None) -> SyncReport:
        """Create or refresh every leaderboard folder of ``leaderboards_dir``, or of a problems
        repository (``admin sync --from``): the one rule for first start and `sync`."""
        return sync_folder(
            session,
            self.settings.leaderboards_dir if source is None else source.root,
            served_gpus=sorted(self.served_gpus()),
            now=self.now(),
            default_days=self.settings.default_deadline_days,
            cards={name: gpu.count for name, gpu in self.settings.gpus.items()},
            owner=None if source is None else source.owner,
            levels=FOLDER_LEVELS if source is None else source.levels,
        )

    async def handle(self, request: Request) -> Reply:
        """Run one command. User errors become replies; anything else is logged, never shown."""
        self._loop = asyncio.get_running_loop()
        try:
            cmd = find_command(request.command)
            request.role = role_of(request.actor, self.settings)
            if not allows(request.role, cmd.role):
                reply = Reply.error(
                    f"Only {cmd.role.value}s may use {cmd.name}.", "Ask an admin for the role."
                )
                reply.problem = Refusal("forbidden")
                return reply
            await asyncio.to_thread(self._admit_by_role, request)
            request.args = coerce_args(cmd, request.args)
            reply = await asyncio.to_thread(cmd.handler, self, request)
        except NeedsChoice as exc:
            reply = Reply.error(exc.message, exc.hint)
            reply.choices = {exc.param: exc.options}
            reply.problem = Refusal("needs_choice")
            return reply
        except UserError as exc:
            reply = Reply.error(exc.message, exc.hint)
            reply.problem = Refusal(exc.kind, getattr(exc, "retry_after_s", None))
            return reply
        except Exception:
            incident = uuid.uuid4().hex[:8]
            log.exception("command failed", command=request.command, incident=incident,
                          actor=request.actor.identity)
            reply = Reply.error(
                f"Something went wrong on our side (incident {incident}).",
                "Nothing you sent was lost; an admin can look the incident up in the log.",
            )
            reply.problem = Refusal("internal")
            return reply
        if reply.submission_id is not None:
            self.pipeline.wake()
        return reply

    def _admit_by_role(self, request: Request) -> None:
        """The actor joins each private leaderboard whose role list names them (membership)."""
        with session_scope(self.engine) as session:
            admit_by_role(session, request.actor)

    def cancel_jobs(self, job_ids: list[int]) -> None:
        """Called from a command's thread: cancellation itself runs on the event loop."""
        assert self._loop is not None, "cancel_jobs outside handle()"
        for job_id in job_ids:
            asyncio.run_coroutine_threadsafe(self.pipeline.cancel(job_id), self._loop)

    async def complete(self, kind: Kind, prefix: str, args: dict[str, Any] | None = None) -> list[str]:
        """Autocomplete for a parameter of that kind (leaderboards, GPUs)."""
        return await asyncio.to_thread(complete, self.engine, self.settings, kind, prefix, args or {})

    async def submission_report(self, submission_id: int, sight: Sight = EVERYTHING, *,
                                pictures: bool = False) -> Reply:
        """The report of a submission: by default its author's (what a submission's own
        conversation ends with); ``sight`` (``kernelcup.core.access.visibility.sight_of``) for
        anyone else. With ``pictures`` (an adapter that shows them), a ranked submission's report
        ends with its history against the leader, a chart per GPU (``kernelcup.core.charts``)."""
        def build() -> Reply:
            plots: list[HistoryPlot] = []
            with session_scope(self.engine) as session:
                reply = submission_reply(session, submission_id, sight)
                if pictures and charts_on():
                    plots = submission_history_plots(session, submission_id)
            reply.blocks.extend(history_images(plots))  # drawn in this worker thread
            return reply

        return await asyncio.to_thread(build)

    def follow(self, submission_id: int) -> AsyncIterator[JobEvent]:
        return self.pipeline.follow(submission_id)
