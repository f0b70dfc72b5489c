"""``leaderboards_dir`` pointed at a folder laid out as GPU MODE's problem sets, on a real database."""

from __future__ import annotations

from datetime import UTC, datetime
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
