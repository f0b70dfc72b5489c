"""Rows for store tests, written the way the job pipeline writes them: a submission, its job,
its run, and ``record_run`` in the run's transaction."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from sqlalchemy.engine import Engine
from sqlmodel import select

from kernelcup.core.leaderboards.ranking import RankChange, record_run
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import BestScore, Code, Job, Leaderboard, LeaderboardGpu, Run, Submission, User

START = datetime(2026, 1, 1, tzinfo=UTC)
SOURCE = "def custom_kernel(data):\n    return data\n"
SHA = hashlib.sha256(SOURCE.encode()).hexdigest()

Entry = tuple[int, str, int, int, int, float, datetime]  # a BestScore row, comparable


class Scenario:
    """A leaderboard world; each submission is one minute after the previous one."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.clock = START
        with session_scope(engine) as session:
            session.add(Code(sha256=SHA, content=SOURCE))

    def tick(self) -> datetime:
        self.clock += timedelta(minutes=1)
        return self.clock

    def user(self, name: str, banned: bool = False) -> int:
        with session_scope(self.engine) as session:
            user = User(identity=f"console:{name}", display_name=name, banned=banned)
            session.add(user)
            session.flush()
            assert user.id is not None
            return user.id

    def leaderboard(self, name: str = "grayscale", gpus: tuple[str, ...] = ("H100",)) -> int:
        with session_scope(self.engine) as session:
            board = Leaderboard(
                name=name,
                deadline=START + timedelta(days=30),
                task_json="{}",
                secret_seed=12345,
            )
            session.add(board)
            session.flush()
            assert board.id is not None
            session.add_all(LeaderboardGpu(leaderboard_id=board.id, gpu=gpu) for gpu in gpus)
            return board.id

    def submit(
        self, board: int, user: int, mode: str = "ranked", at: datetime | None = None
    ) -> int:
        with session_scope(self.engine) as session:
            submission = Submission(
                leaderboard_id=board,
                user_id=user,
                code_sha256=SHA,
                file_name="submission.py",
                mode=mode,
                created_at=at or self.tick(),
            )
            session.add(submission)
            session.flush()
            assert submission.id is not None
            return submission.id

    def finish(
        self,
        submission_id: int,
        score: float | None,
        gpu: str = "H100",
        passed: bool = True,
        noise: tuple[float, float] | None = None,
    ) -> RankChange | None:
        """The job pipeline's last step: the job's run, folded into the ranking, one commit."""
        with session_scope(self.engine) as session:
            submission = session.get(Submission, submission_id)
            assert submission is not None
            job = Job(submission_id=submission_id, gpu=gpu, runner="local", status="succeeded")
            session.add(job)
            session.flush()
            assert job.id is not None
            run = Run(
                job_id=job.id,
                submission_id=submission_id,
                leaderboard_id=submission.leaderboard_id,
                user_id=submission.user_id,
                gpu=gpu,
                mode=submission.mode,
                passed=passed,
                score=score,
                score_low=noise[0] if noise else None,
                score_high=noise[1] if noise else None,
                result_json="{}",
            )
            session.add(run)
            return record_run(session, run)

    def ranked(
        self,
        board: int,
        user: int,
        score: float | None,
        gpu: str = "H100",
        passed: bool = True,
        mode: str = "ranked",
        at: datetime | None = None,
        noise: tuple[float, float] | None = None,
    ) -> RankChange | None:
        return self.finish(self.submit(board, user, mode, at), score, gpu, passed, noise)

    def entries(self, board: int) -> list[Entry]:
        with session_scope(self.engine) as session:
            rows = session.exec(
                select(BestScore).where(BestScore.leaderboard_id == board)
            ).all()
            return sorted(
                (r.leaderboard_id, r.gpu, r.user_id, r.run_id, r.submission_id, r.score,
                 r.submitted_at)
                for r in rows
            )
