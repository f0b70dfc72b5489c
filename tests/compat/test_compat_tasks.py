"""GPU MODE's task.yml fields, as the core reads them: each is used or refused in words."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelcup.core.errors import UserError
from kernelcup.core.leaderboards.task_fields import combine_seed
from kernelcup.core.leaderboards.tasks import read_task_folder, task_config
from kernelcup.harness.evaluators import uses_own_evaluator
from tests.compat.support import LEADERBOARDS

SHIPPED = Path(__file__).resolve().parents[2] / "leaderboards"


def _folder(tmp_path: Path, extra: str, reference: str = "def generate_input(size, seed): ...\n") -> Path:
    folder = tmp_path / "problem"
    folder.mkdir()
    (folder / "reference.py").write_text(reference)
    (folder / "eval.py").write_text("# an evaluator\n")
    (folder / "task.yml").write_text(
        "files:\n"
        '  - {name: submission.py, source: "@SUBMISSION@"}\n'
        "  - {name: reference.py, source: reference.py}\n"
        "  - {name: eval.py, source: eval.py}\n"
        "lang: py\n"
        "config: {main: eval.py}\n"
        "tests:\n  - {size: 4, seed: 10}\n"
        "benchmarks:\n  - {size: 8, seed: 20}\n" + extra
    )
    return folder


def test_a_problem_naming_no_ranking_ranks_by_its_last_benchmark() -> None:
    task = read_task_folder(LEADERBOARDS / "wide_reference").task
    assert task_config(task).ranking_by == "last"


@pytest.mark.parametrize("folder", sorted(p.parent for p in SHIPPED.glob("*/task.yml")), ids=lambda p: p.name)
def test_kernelcups_own_leaderboards_keep_the_geometric_mean(folder: Path) -> None:
    assert task_config(read_task_folder(folder, reach=folder.parent).task).ranking_by == "geom"


def test_multi_gpu_without_world_size_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="test 1 of a multi-GPU leaderboard needs world_size"):
        read_task_folder(_folder(tmp_path, "multi_gpu: true\n"))


def test_a_leaderboard_only_for_another_vendors_gpus_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"runs on AMD GPUs \(MI300X\); kernelcup runs NVIDIA GPUs and the CPU only"):
        read_task_folder(_folder(tmp_path, "gpus: [MI300X]\n"))


def test_a_leaderboard_naming_an_nvidia_gpu_besides_loads(tmp_path: Path) -> None:
    assert read_task_folder(_folder(tmp_path, "gpus: [MI300X, H100]\n")).task["gpus"] == ["MI300X", "H100"]


def test_the_task_seed_is_mixed_into_every_case_seed_as_gpu_mode_does(tmp_path: Path) -> None:
    config = task_config(read_task_folder(_folder(tmp_path, "seed: 1234\n")).task)
    assert config.tests[0]["seed"] == combine_seed(10, 1234) == 10 + (10 + 1234) * (10 + 1234 + 1) // 2
    assert config.benchmarks[0]["seed"] == combine_seed(20, 1234)


def test_the_timeouts_are_the_harness_limits_per_mode(tmp_path: Path) -> None:
    from kernelcup.core.pipeline.timeouts import harness_limit
    from kernelcup.harness.spec import Mode

    task = read_task_folder(_folder(tmp_path, "test_timeout: 30\nranked_timeout: 420\n")).task
    assert harness_limit(task, Mode.TEST, 180) == 30 and harness_limit(task, Mode.RANKED, 180) == 420
    assert harness_limit(task, Mode.BENCHMARK, 180) == 180


def test_an_unknown_evaluator_choice_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="`evaluator` must be one of auto, standard, custom"):
        read_task_folder(_folder(tmp_path, "evaluator: mine\n"))


def test_a_reference_without_generate_input_means_the_leaderboard_brings_its_evaluator() -> None:
    folder = read_task_folder(LEADERBOARDS / "own_evaluator")
    assert uses_own_evaluator(task_config(folder.task), folder.files)


def test_a_reference_with_the_standard_functions_runs_in_kernelcups_harness(tmp_path: Path) -> None:
    reference = "from utils import make_match_reference\ndef generate_input(size, seed): ...\n"
    reference += "def ref_kernel(data): ...\ncheck_implementation = make_match_reference(ref_kernel)\n"
    folder = read_task_folder(_folder(tmp_path, "", reference))
    assert not uses_own_evaluator(task_config(folder.task), folder.files)


def test_task_yml_overrides_the_evaluator_choice(tmp_path: Path) -> None:
    standard = read_task_folder(_folder(tmp_path, "evaluator: custom\n"))
    assert uses_own_evaluator(task_config(standard.task), standard.files)
    own = read_task_folder(LEADERBOARDS / "own_evaluator")
    assert not uses_own_evaluator(task_config({**own.task, "evaluator": "standard"}), own.files)
