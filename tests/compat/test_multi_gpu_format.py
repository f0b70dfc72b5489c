"""Multi-GPU leaderboards as the core reads them: ``multi_gpu: true`` with ``world_size`` in
every case, and the GPU registry's card counts deciding where they may open (create and sync
refuse, in one line, a leaderboard whose ranks no GPU entry has the cards for)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session

from kernelcup.core.config import load_settings
from kernelcup.core.errors import UserError
from kernelcup.core.leaderboards.catalog import create_leaderboard, leaderboard_gpus, sync_folder
from kernelcup.core.leaderboards.tasks import read_task_folder, task_config

SHIPPED = Path(__file__).resolve().parents[2] / "leaderboards"
NOW = datetime(2026, 11, 1, tzinfo=UTC)
CARDS = {"cpu": 8, "H100": 1, "H100x2": 2, "H100x8": 8}


def _folder(root: Path, name: str, cases: str, extra: str = "multi_gpu: true\n") -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "reference.py").write_text("def generate_input(rank, world_size, size, seed): ...\n")
    (folder / "task.yml").write_text(
        "files:\n"
        '  - {name: submission.py, source: "@SUBMISSION@"}\n'
        "  - {name: reference.py, source: reference.py}\n"
        f"lang: py\n{extra}tests:\n{cases}benchmarks:\n{cases}"
    )
    return folder


def _cases(*sizes: int) -> str:
    return "".join(f"  - {{world_size: {ws}, size: 8, seed: {i}}}\n" for i, ws in enumerate(sizes))


@pytest.mark.parametrize("name", ["allreduce", "gemm_rs"])
def test_the_shipped_multi_gpu_leaderboards_run_two_ranks(name: str) -> None:
    task = read_task_folder(SHIPPED / name, reach=SHIPPED).task
    assert task["multi_gpu"] is True and task_config(task).world_size == 2


def test_a_single_gpu_leaderboard_has_no_ranks() -> None:
    assert task_config(read_task_folder(SHIPPED / "vectoradd", reach=SHIPPED).task).world_size == 0


@pytest.mark.parametrize(
    ("cases", "extra", "refusal"),
    [
        ("  - {size: 8, seed: 1}\n", "multi_gpu: true\n", "test 1 of a multi-GPU leaderboard needs world_size"),
        (_cases(2, 4), "multi_gpu: true\n", r"must all have the same world_size \(found 2, 4\)"),
        (_cases(2), "", "test 1 names a world_size but the leaderboard is not multi-GPU"),
        (_cases(0), "multi_gpu: true\n", "needs world_size, a whole number of ranks from 1 to 64"),
        (_cases(2), "multi_gpu: true\nevaluator: custom\n", "runs with kernelcup's harness, not its own evaluator"),
    ],
)
def test_a_malformed_multi_gpu_task_is_refused_in_words(tmp_path: Path, cases: str, extra: str, refusal: str) -> None:
    with pytest.raises(UserError, match=refusal):
        read_task_folder(_folder(tmp_path, "board", cases, extra))


def _sync(engine: Engine, root: Path, served: list[str]) -> tuple[dict[str, list[str]], dict[str, str]]:
    with Session(engine) as session:
        report = sync_folder(session, root, served_gpus=served, now=NOW, default_days=30, cards=CARDS)
        session.commit()
        from sqlmodel import select

        from kernelcup.core.store.models import Leaderboard

        boards = session.exec(select(Leaderboard)).all()
        return {b.name: leaderboard_gpus(session, b.id or 0) for b in boards}, report.errors


def test_sync_opens_a_multi_gpu_leaderboard_only_where_an_entry_has_the_cards(engine: Engine, tmp_path: Path) -> None:
    _folder(tmp_path, "two", _cases(2, 2))
    _folder(tmp_path, "single", "  - {size: 8, seed: 1}\n", "")
    gpus, errors = _sync(engine, tmp_path, ["H100", "H100x2", "H100x8", "cpu"])
    assert not errors
    assert gpus["two"] == ["H100x2", "H100x8", "cpu"]
    assert gpus["single"] == ["H100", "cpu"]  # never on an entry of several cards


def test_sync_refuses_in_one_line_a_leaderboard_whose_ranks_no_entry_has(engine: Engine, tmp_path: Path) -> None:
    _folder(tmp_path, "sixteen", _cases(16))
    gpus, errors = _sync(engine, tmp_path, ["H100", "H100x2", "cpu"])
    assert "sixteen" not in gpus
    assert errors["sixteen"] == (
        "sixteen: its cases run 16 ranks (world_size 16), one per GPU, and no GPU here has that many cards "
        "(H100 has 1, H100x2 has 2, cpu has 8)"
    )


def test_create_refuses_a_named_gpu_with_too_few_cards(engine: Engine, tmp_path: Path) -> None:
    folder = read_task_folder(_folder(tmp_path, "two", _cases(2)))
    with Session(engine) as session, pytest.raises(UserError) as refused:
        create_leaderboard(session, folder, deadline=NOW + timedelta(days=1), gpus=["H100", "H100x2"], cards=CARDS)
    assert refused.value.message == "two: its cases run 2 ranks (world_size 2), one per GPU, and H100 has 1"


def test_gpu_mode_distributed_problems_are_refused_only_for_their_vendor(engine: Engine, tmp_path: Path) -> None:
    root = tmp_path / "problems"
    _folder(root / "amd_distributed", "gemm-rs", _cases(8, 8))
    (root / "amd_distributed.yaml").write_text(
        "problems:\n  - {directory: amd_distributed/gemm-rs, name: amd-gemm-rs, gpus: [MI300x8]}\n"
    )
    _, errors = _sync(engine, root, ["H100", "cpu"])
    assert errors["amd-gemm-rs"].endswith("this leaderboard runs on AMD GPUs (MI300x8); kernelcup runs NVIDIA GPUs "
                                          "and the CPU only")


def test_the_registry_gives_each_multi_card_entry_its_count_card_and_modal_string() -> None:
    gpus = load_settings(env={}).gpus
    assert gpus["H200x2"].count == 2 and gpus["H200x2"].card == "H200"
    assert gpus["H100x8"].options["modal_gpu"] == "H100!:8" and gpus["H100x8"].card == "H100"
    assert gpus["H100"].count == 1 and gpus["cpu"].count == 8
