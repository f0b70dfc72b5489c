"""The exported rows: one per run of the chosen leaderboards, read in batches of run ids.

What a row carries is what anyone may see of the run (``kernelcup.core.access.visibility``): the
code and the full verdict where the leaderboard makes code public (after its deadline, as its
task.yml or the operator says), else no code and the verdict rebuilt from public facts. Withdrawn
submissions are left out. Authors are a stable pseudonym (an HMAC of their id under a key kept
in the database) unless they opted in (``publish-name on``), then their display name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select as select_rows
from sqlmodel import Session, col, select

from kernelcup.core.access.visibility import public_verdict, sight_of
from kernelcup.core.store.db import as_utc
from kernelcup.core.store.models import Code, Leaderboard, Role, Run, Setting, Submission, User
from kernelcup.harness.spec import Result, SpecError

BATCH = 5000
_KEY_SETTING = "export_pseudonym_key"
# The GPU's and the software's state as the harness recorded it; never the runner's hostname.
SYSTEM_TEXT = ("device", "gpu", "driver", "torch", "cuda", "triton", "python", "isolation")
SYSTEM_NUMBERS = ("sm_clock_mhz_before", "sm_clock_mhz_after", "sm_clock_mhz_min", "sm_clock_mhz_max",
                  "memory_clock_mhz_min", "memory_clock_mhz_max", "gpu_temp_c_max", "power_w_max")
TIMING = ("runs", "median_ns", "mean_ns", "min_ns", "max_ns", "std_ns", "ci_low_ns", "ci_high_ns", "tflops",
           "gbps", "percent_of_peak")
_ANYONE = Submission(user_id=0, leaderboard_id=0, code_sha256="", file_name="", mode="")  # no user has id 0


@dataclass(frozen=True)
class Board:
    id: int
    name: str
    code_public: bool  # anyone may see its code now


def boards_of(session: Session, names: list[str], now: datetime, default_public: bool) -> list[Board]:
    """The leaderboards asked for by name, with whether their code is public now."""
    found = session.exec(select(Leaderboard).where(col(Leaderboard.name).in_(names))).all()
    return [_board(board, now, default_public) for board in found]


def boards_closing_in(session: Session, start: datetime, end: datetime, now: datetime,
                      default_public: bool) -> list[Board]:
    """A season: every leaderboard whose deadline falls in [start, end)."""
    found = session.exec(select(Leaderboard).where(col(Leaderboard.deadline) >= start,
                                                   col(Leaderboard.deadline) < end)).all()
    return [_board(board, now, default_public) for board in found]


def _board(board: Leaderboard, now: datetime, default_public: bool) -> Board:
    assert board.id is not None
    sight = sight_of(_ANYONE, board, user_id=None, role=Role.USER, now=now, public_after_deadline=default_public)
    return Board(board.id, board.name, sight.private)


def pseudonym_key(session: Session) -> bytes:
    """The key of the authors' pseudonyms: made once, so a user keeps one pseudonym across exports."""
    row = session.get(Setting, _KEY_SETTING)
    if row is None:
        row = Setting(key=_KEY_SETTING, value=secrets.token_hex(32))
        session.add(row)
        session.flush()
    return bytes.fromhex(row.value)


def batches(session: Session, boards: list[Board], key: bytes, size: int = BATCH) -> Iterator[list[dict[str, Any]]]:
    """The rows of every run on ``boards``, oldest run first, ``size`` at a time."""
    by_id = {board.id: board for board in boards}
    users = {uid: (name, named) for uid, name, named in
             session.execute(select_rows(col(User.id), col(User.display_name), col(User.named_in_exports)))}
    after = 0
    while by_id:
        rows = session.execute(
            select_rows(col(Run.id), col(Run.leaderboard_id), col(Run.user_id), col(Run.submission_id), col(Run.gpu),
                        col(Run.mode), col(Run.passed), col(Run.score), col(Run.score_low), col(Run.score_high),
                        col(Run.result_json), col(Run.system_json), col(Run.created_at), col(Submission.created_at),
                        col(Submission.file_name), col(Submission.code_sha256))
            .join(Submission, col(Submission.id) == col(Run.submission_id))
            .where(col(Run.leaderboard_id).in_(list(by_id)), col(Run.id) > after,
                   col(Submission.withdrawn_at).is_(None))
            .order_by(col(Run.id)).limit(size)
        ).all()
        if not rows:
            return
        after = rows[-1][0]
        shown = {row[15] for row in rows if by_id[row[1]].code_public}
        code = dict(session.execute(select_rows(col(Code.sha256), col(Code.content))
                                    .where(col(Code.sha256).in_(shown))).all()) if shown else {}
        yield [_row(row, by_id[row[1]], users, key, code) for row in rows]


def _row(row: Any, board: Board, users: dict[int, tuple[str, bool]], key: bytes,
         code: dict[str, str]) -> dict[str, Any]:
    (run_id, _, user_id, submission_id, gpu, mode, passed, score, low, high, result_json, system_json,
     finished_at, submitted_at, file_name, sha) = row
    name, named = users.get(user_id, ("?", False))
    result = _json(result_json)
    system = {**_json(system_json), **(result.get("system") or {})}
    return {
        "leaderboard": board.name, "submission_id": submission_id, "run_id": run_id, "gpu": gpu, "mode": mode,
        "user": name if named else "anon-" + hmac.new(key, str(user_id).encode(), hashlib.sha256).hexdigest()[:12],
        "named": bool(named), "submitted_at": as_utc(submitted_at), "finished_at": as_utc(finished_at),
        "file_name": file_name, "code_sha256": sha, "code": code.get(sha) if board.code_public else None,
        "status": str(result.get("status") or ""), "passed": bool(passed),
        "verdict": _verdict(result, board.code_public),
        "score_s": score, "score_low_s": low, "score_high_s": high,
        "tests": [{"case": json.dumps(t.get("case"), sort_keys=True), "passed": bool(t.get("passed"))}
                  for t in result.get("tests") or []],
        "benchmarks": [_timing(b) for b in result.get("benchmarks") or []],
        **{f"system_{name}": str(system.get(name) or "") for name in SYSTEM_TEXT},
        **{f"system_{name}": _number(system.get(name)) for name in SYSTEM_NUMBERS},
        "system_clock_limits": [str(v) for v in system.get("clock_limits") or []],
    }


def _timing(case: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"case": json.dumps(case.get("case"), sort_keys=True), "passed": bool(case.get("passed"))}
    out.update({name: _number(case.get(name)) for name in TIMING})
    out["runs"] = int(case.get("runs") or 0)
    out["round_median_ns"] = [float(v) for v in case.get("round_median_ns") or []]
    return out


def _verdict(result: dict[str, Any], code_public: bool) -> str:
    verdict = str(result.get("verdict") or "")
    if code_public or result.get("status") == "passed":
        return verdict  # a passing run's line is made of counts and timings (visibility.public_verdict)
    try:
        return public_verdict(Result.from_dict(result))
    except (SpecError, TypeError, KeyError, ValueError):
        return str(result.get("status") or "")


def _json(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
