"""The rules underneath, without a clock: config, which jobs a leaderboard needs, ties."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from kernelcup.core.config import load_settings
from kernelcup.core.scheduling.deadlines import BoardState
from kernelcup.core.scheduling.schedule_config import ScheduleConfig, parse_duration
from kernelcup.core.scheduling.scheduler import CLOSE, OPENED, REMIND, plan
from kernelcup.core.scheduling.standings_final import Entry, Measure, measure, rank_entries
from kernelcup.core.store.models import FinalRun
from kernelcup.harness.spec import CaseResult, Mode, Result, Status

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONFIG = ScheduleConfig()


def board(deadline: datetime, **state: object) -> BoardState:
    values: dict[str, object] = dict(id=7, name="cup", deadline=deadline, created_at=NOW - timedelta(days=30),
                                     public=True, gpus=("cpu",),
                                     opened_announced=True, closed=False, final_queued=False, final_done=False,
                                     reminders_sent=frozenset())
    values.update(state)
    return BoardState(**values)  # type: ignore[arg-type]


def test_the_shipped_config_gives_the_documented_defaults() -> None:
    config = ScheduleConfig.from_settings(load_settings(env={}))
    assert config.reminders == (timedelta(hours=24), timedelta(hours=1))
    assert (config.final_top_n, config.final_rounds, config.misfire_grace) == (5, 3, timedelta(hours=6))


def test_the_environment_overrides_the_schedule() -> None:
    settings = load_settings(env={"KERNELCUP_SCHEDULE__REMINDERS": "[2h, 10m]",
                                  "KERNELCUP_SCHEDULE__FINAL_TOP_N": "3"})
    config = ScheduleConfig.from_settings(settings)
    assert config.reminders == (timedelta(hours=2), timedelta(minutes=10))
    assert config.final_top_n == 3


@pytest.mark.parametrize(
    ("text", "seconds"), [("24h", 86400), ("1h30m", 5400), ("0.5s", 0.5), (90, 90), ("2d", 172800)]
)
def test_durations_read_as_written(text: object, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("schedule", [{"reminders": ["soon"]}, {"final_top_n": 0}, {"reminder": ["1h"]}])
def test_a_bad_schedule_is_refused_with_its_name(schedule: dict[str, object]) -> None:
    settings = load_settings(env={})
    with pytest.raises(ValueError, match=r"soon|final_top_n|reminder"):
        ScheduleConfig.from_settings(replace(settings, sections={"schedule": schedule}))


def test_an_open_leaderboard_needs_its_close_and_reminders() -> None:
    jobs = plan(board(NOW + timedelta(days=3)), CONFIG, NOW)
    assert {job_id: (p.func, p.run_at) for job_id, p in jobs.items()} == {
        "leaderboard:7:close": (CLOSE, NOW + timedelta(days=3)),
        "leaderboard:7:remind:86400": (REMIND, NOW + timedelta(days=2)),
        "leaderboard:7:remind:3600": (REMIND, NOW + timedelta(days=3, hours=-1)),
    }


def test_a_new_leaderboard_is_announced_now() -> None:
    jobs = plan(board(NOW + timedelta(days=3), opened_announced=False), CONFIG, NOW)
    assert (jobs["leaderboard:7:opened"].func, jobs["leaderboard:7:opened"].run_at) == (OPENED, NOW)


def test_sent_and_long_past_reminders_are_not_planned() -> None:
    soon = board(NOW + timedelta(minutes=30), reminders_sent=frozenset())
    assert "leaderboard:7:remind:3600" not in plan(soon, CONFIG, NOW)  # due 30 min ago: past the grace
    sent = board(NOW + timedelta(days=3), reminders_sent=frozenset({86400}))
    assert "leaderboard:7:remind:86400" not in plan(sent, CONFIG, NOW)
    late = board(NOW + timedelta(minutes=50))
    assert plan(late, CONFIG, NOW)["leaderboard:7:remind:3600"].run_at == NOW  # 10 min late: still sent


def test_a_reminder_due_before_the_board_opened_is_not_planned() -> None:
    created_now = board(NOW + timedelta(minutes=50), created_at=NOW)  # its opening says "closes in 50 minutes"
    assert "leaderboard:7:remind:3600" not in plan(created_now, CONFIG, NOW)


def test_a_missed_deadline_closes_now_inside_the_grace_and_not_after() -> None:
    assert plan(board(NOW - timedelta(hours=1)), CONFIG, NOW)["leaderboard:7:close"].run_at == NOW
    assert plan(board(NOW - timedelta(hours=7)), CONFIG, NOW) == {}
    assert plan(board(NOW - timedelta(hours=1), closed=True), CONFIG, NOW) == {}


def _entry(rank_before: int, score: float, low: float, high: float) -> Entry:
    rerun = FinalRun(leaderboard_id=1, gpu="cpu", user_id=rank_before, entry_submission_id=rank_before,
                     submission_id=10 + rank_before, rank_before=rank_before, score_before=score)
    return Entry(rerun, Measure(score, low, high))


def test_ties_compare_with_the_group_leader_not_the_neighbour() -> None:
    a = _entry(1, 1.00, 0.95, 1.05)
    b = _entry(2, 1.04, 1.00, 1.08)  # reaches a: tied
    c = _entry(3, 1.09, 1.06, 1.12)  # reaches b, not a: a new group
    failed = Entry(_entry(4, 0.5, 0.5, 0.5).rerun, None, "failed: wrong answer")
    ranked = rank_entries([c, failed, b, a])
    assert [(e.rerun.rank_before, e.rank, e.tied) for e in ranked] == [
        (1, 1, True), (2, 1, True), (3, 3, False), (4, None, False)]


def _result(medians_ns: list[float], half_ns: float) -> Result:
    cases = [CaseResult(case={"n": i}, passed=True, median_ns=m, ci_low_ns=m - half_ns, ci_high_ns=m + half_ns)
             for i, m in enumerate(medians_ns)]
    return Result(job_id="1", mode=Mode.RANKED, status=Status.PASSED, verdict="ok", benchmarks=cases, score_s=1.0)


def test_the_measure_takes_per_case_medians_over_rounds_and_the_widest_noise() -> None:
    rounds = [_result([100, 400], 10), _result([110, 400], 10), _result([90, 420], 30)]
    got = measure(rounds, "geom")
    assert got.score == pytest.approx((100e-9 * 400e-9) ** 0.5)
    assert got.low == pytest.approx((60e-9 * 390e-9) ** 0.5)  # the lowest bound of any round
    assert got.high == pytest.approx((120e-9 * 450e-9) ** 0.5)


def test_without_benchmark_statistics_the_spread_of_scores_is_the_noise() -> None:
    rounds = [Result(job_id="1", mode=Mode.RANKED, status=Status.PASSED, verdict="ok", score_s=s) for s in (3, 1, 2)]
    assert measure(rounds, "geom") == Measure(2, 1, 3)
