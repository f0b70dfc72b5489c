"""``leaderboards_dir`` pointed at a folder laid out as GPU MODE's problem sets, on a real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from kernelcup.core.leaderboards.catalog import leaderboard_gpus, sync_folder
from kernelcup.core.store.models import Leaderboard

NOW = datetime(2026, 11, 1, tzinfo=UTC)
SERVED = ["H100", "cpu"]


def _problem(folder: Path, extra: str = "") -> None:
    """A problem folder as GPU MODE lays them out: utils.py and eval.py shared by the set."""
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text(
        "from utils import check\ndef generate_input(size, seed): ...\ndef ref_kernel(data): ...\n"
        "check_implementation = check\n"
    )
    (folder / "task.yml").write_text(
        "files:\n"
        '  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
        '  - {"name": "utils.py", "source": "../utils.py"}\n'
        '  - {"name": "reference.py", "source": "reference.py"}\n'
        '  - {"name": "eval.py", "source": "../eval.py"}\n'
        'lang: "py"\nconfig:\n  main: "eval.py"\ntemplates:\n  Python: "../template.py"\n'
        'tests:\n  - {"size": 4, "seed": 1}\nbenchmarks:\n  - {"size": 8, "seed": 2}\n' + extra
    )


def _problem_set(problems: Path, name: str, entries: list[tuple[str, str, list[str]]]) -> None:
    folder = problems / name
    folder.mkdir(parents=True)
    for shared in ("utils.py", "eval.py", "template.py"):
        (folder / shared).write_text(f"# {shared} shared by the {name} set\n")
    lines = [f"name: {name} problems", "problems:"]
    for directory, leaderboard, gpus in entries:
        _problem(problems / directory)
        lines += [f"  - directory: {directory}", f"    name: {leaderboard}", f"    gpus: [{', '.join(gpus)}]"]
    (problems / f"{name}.yaml").write_text("\n".join(lines) + "\n")


@pytest.fixture
def problems(tmp_path: Path) -> Path:
    root = tmp_path / "problems"
    _problem_set(root, "practice", [("practice/scan_py", "scan_v2", ["B200", "H100"]),
                                    ("practice/sort_py", "sort_v2", ["H100"])])
    _problem_set(root, "amdset", [("amdset/gemm", "amd-gemm", ["MI300"])])
    _problem(root / "distributed" / "all2all", "multi_gpu: true\n")
    (root / "distributed" / "broken").mkdir(parents=True)
    (root / "distributed" / "broken" / "task.yml").write_text("files: [unclosed\n")
    return root


def _sync(engine: Engine, root: Path) -> tuple[dict[str, list[str]], dict[str, str], dict[str, str]]:
    with Session(engine) as session:
        report = sync_folder(session, root, served_gpus=SERVED, now=NOW, default_days=30)
        session.commit()
        boards = session.exec(select(Leaderboard)).all()
        gpus = {board.name: leaderboard_gpus(session, board.id or 0) for board in boards}
        rankings = {board.name: board.ranking_by for board in boards}
    return gpus, rankings, report.errors


def test_gpu_mode_problems_load_under_their_leaderboard_names(engine: Engine, problems: Path) -> None:
    gpus, rankings, _ = _sync(engine, problems)
    assert set(gpus) == {"scan_v2", "sort_v2"}
    assert gpus["scan_v2"] == ["H100", "cpu"] and rankings["scan_v2"] == "last"


def test_problems_that_cannot_run_here_each_get_one_clear_line(engine: Engine, problems: Path) -> None:
    _, _, errors = _sync(engine, problems)
    assert errors["amd-gemm"] == (
        "amd-gemm's problem set: this leaderboard runs on AMD GPUs (MI300); kernelcup runs NVIDIA GPUs and the CPU only"
    )
    assert errors["all2all"] == ("task.yml: test 1 of a multi-GPU leaderboard needs world_size, a whole number of "
                                 "ranks from 1 to 64 (got None)")
    assert errors["broken"].startswith("task.yml is not valid YAML")
    assert all("\n" not in line.strip() and "Traceback" not in line for line in errors.values())


def test_one_set_folder_also_loads_with_its_sets_names(engine: Engine, problems: Path) -> None:
    gpus, _, errors = _sync(engine, problems / "practice")
    assert set(gpus) == {"scan_v2", "sort_v2"} and not errors


def test_a_second_sync_changes_nothing(engine: Engine, problems: Path) -> None:
    _sync(engine, problems)
    with Session(engine) as session:
        report = sync_folder(session, problems, served_gpus=SERVED, now=NOW, default_days=30)
    assert sorted(report.unchanged) == ["scan_v2", "sort_v2"] and not report.created


def test_a_problem_sets_deadlines_are_the_leaderboards_and_one_already_past_opens_closed(
    engine: Engine, tmp_path: Path
) -> None:
    """GPU MODE's set files give each problem a deadline (``"2025-11-29 6:59"``, a bare date that
    YAML reads as one, or the set's own), in UTC; a set whose competition has ended loads closed."""
    root = tmp_path / "problems"
    _problem_set(root, "contest", [("contest/a_py", "a_v1", ["H100"]), ("contest/b_py", "b_v1", ["H100"]),
                                   ("contest/c_py", "c_v1", ["H100"])])
    text = (root / "contest.yaml").read_text()
    text = text.replace("name: contest problems\n", 'name: contest problems\ndeadline: "2027-01-31"\n')
    text = text.replace("    name: a_v1\n", '    name: a_v1\n    deadline: "2026-11-29 6:59" # midnight pst\n')
    text = text.replace("    name: b_v1\n", "    name: b_v1\n    deadline: 2025-06-30\n")
    (root / "contest.yaml").write_text(text)
    _problem(root / "contest" / "d_py", 'deadline: "2026-12-24 18:00"\n')
    _problem(root / "contest" / "e_py", 'deadline: "next friday"\n')
    _problem(root / "contest" / "f_py", 'deadline: "  "\n')  # blank: as if absent
    with Session(engine) as session:
        report = sync_folder(session, root, served_gpus=SERVED, now=NOW, default_days=30)
        session.commit()
        boards = {board.name: board for board in session.exec(select(Leaderboard)).all()}
        deadlines = {name: board.deadline.replace(tzinfo=UTC) for name, board in boards.items()}
        closed = {name for name, board in boards.items() if board.closed_at is not None}
        finals_done = {name for name, board in boards.items() if board.final_done_at is not None}
    assert deadlines == {
        "a_v1": datetime(2026, 11, 29, 6, 59, tzinfo=UTC),
        "b_v1": datetime(2025, 6, 30, tzinfo=UTC),
        "c_v1": datetime(2027, 1, 31, tzinfo=UTC),  # the set's own
        "d_py": datetime(2026, 12, 24, 18, 0, tzinfo=UTC),  # task.yml's, no zone: UTC
        "f_py": NOW + timedelta(days=30),  # the default
    }
    assert report.closed == ["b_v1"] and closed == finals_done == {"b_v1"}  # nothing left to re-run
    assert report.errors == {"e_py": "e_py's task.yml: the deadline 'next friday' is not a date; write it like "
                                     "2026-12-31, 2026-12-31 23:59 or 2026-12-31T23:59Z (UTC where no zone is given)"}
