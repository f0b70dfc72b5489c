"""Reading a leaderboard folder in GPU MODE's format (task.yml, task.py, reference.py, ...).

The core parses task.yml once (the harness needs no YAML) and stores the parsed task as JSON
and every task file by the name the harness gives it. The submission is not a stored file:
``submission_file_name`` says what name it takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kernelcup.core.errors import UserError
from kernelcup.core.leaderboards import task_fields
from kernelcup.harness.spec import TaskConfig

SUBMISSION_MARK = "@SUBMISSION@"
MAX_TASK_FILE_BYTES = 4 * 1024 * 1024
RANKINGS = ("last", "mean", "geom")
DEFAULT_RANKING = "last"  # GPU MODE's default (RankCriterion.LAST): imported problems rank as there


@dataclass(frozen=True)
class TaskFolder:
    """A leaderboard definition read from disk or from uploaded files."""

    name: str
    task: dict[str, Any]  # the parsed task.yml
    files: dict[str, str]  # task files by final name, the submission excluded
    templates: dict[str, str]  # language -> template source

    @property
    def lang(self) -> str:
        return str(self.task.get("lang", "py"))

    @property
    def description(self) -> str:
        return str(self.task.get("description", "")).strip()


def read_task_folder(folder: Path, name: str | None = None, reach: Path | None = None) -> TaskFolder:
    """Load ``folder/task.yml`` and the files it names.

    Sources resolve inside ``reach`` only (default: the folder itself; a folder synced from the
    operator's ``leaderboards_dir`` may reach its parent, where GPU MODE's problem sets keep a
    shared ``utils.py``). An uploaded bundle carries ``../utils.py`` beside task.yml: it is found
    by its name in the folder. Anything else — an absolute path, ``../../etc``, ``/proc``, a link
    out — gets the same answer as a missing file, so the answer says nothing of the server.
    """
    task_yml = folder / "task.yml"
    if not task_yml.is_file():
        raise UserError(f"{folder.name} has no task.yml",
                        "A leaderboard folder needs task.yml, task.py and reference.py.")
    task = parse_task_yml(_text(task_yml, "task.yml"))
    boundary = (reach or folder).resolve()

    def read(source: str) -> str:
        return _text(_inside(folder, boundary, source), source)

    files = {
        str(entry["name"]): read(str(entry["source"]))
        for entry in task["files"]
        if entry["source"] != SUBMISSION_MARK
    }
    templates = {str(lang): read(str(source)) for lang, source in (task.get("templates") or {}).items()}
    return TaskFolder(name=name or folder.name, task=task, files=files, templates=templates)


def _inside(folder: Path, boundary: Path, source: str) -> Path:
    """The file ``source`` names, if it lies inside ``boundary`` (links resolved first)."""
    refused = UserError(
        f"task.yml names {source!r}, which is not a file inside the leaderboard folder",
        "Sources are paths relative to task.yml, inside the folder (a ../utils.py may sit beside task.yml).",
    )
    if not source or "\0" in source or Path(source).is_absolute():
        raise refused
    for candidate in ((folder / source).resolve(), (folder / Path(source).name).resolve()):
        if candidate.is_relative_to(boundary) and candidate.is_file():
            return candidate
    raise refused


def _text(path: Path, source: str) -> str:
    if path.stat().st_size > MAX_TASK_FILE_BYTES:
        raise UserError(f"{source} is larger than {MAX_TASK_FILE_BYTES // 1024} KiB")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{source} is not UTF-8 text", "Leaderboard files are source code.") from None


def parse_task_yml(text: str) -> dict[str, Any]:
    try:
        task = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"task.yml is not valid YAML: {exc}") from exc
    if not isinstance(task, dict):
        raise UserError("task.yml must be a mapping")
    validate_task(task)
    return task


def validate_task(task: dict[str, Any]) -> None:
    files = task.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) and {"name", "source"} <= f.keys() for f in files):
        raise UserError("task.yml: `files` must be a list of {name, source}")
    if sum(1 for f in files if f["source"] == SUBMISSION_MARK) != 1:
        raise UserError(f"task.yml: exactly one file must have source {SUBMISSION_MARK}")
    if task.get("lang", "py") not in ("py", "cu"):
        raise UserError("task.yml: `lang` must be py or cu")
    for key in ("tests", "benchmarks", "cpu_benchmarks"):
        cases = task.get(key, [])
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
            raise UserError(f"task.yml: `{key}` must be a list of keyword-argument mappings")
    if not task.get("tests"):
        raise UserError("task.yml: at least one test case is needed")
    if task.get("ranking_by", DEFAULT_RANKING) not in RANKINGS:
        raise UserError(f"task.yml: `ranking_by` must be one of {', '.join(RANKINGS)}")
    task_fields.refuse_unsupported(task)


def submission_file_name(task: dict[str, Any]) -> str:
    return next(str(f["name"]) for f in task["files"] if f["source"] == SUBMISSION_MARK)


def task_config(task: dict[str, Any], device: str = "cuda") -> TaskConfig:
    """The harness's view of a task.yml for a job on ``device``: on the CPU, kernelcup's own
    ``cpu_benchmarks`` (sizes a CPU times in seconds, not minutes) stand for ``benchmarks`` where
    the task gives them; every CPU job of the leaderboard, ranked or not, is timed on the same ones."""
    config = task.get("config") or {}
    benchmarks = "cpu_benchmarks" if device == "cpu" and task.get("cpu_benchmarks") else "benchmarks"
    return TaskConfig(
        lang=str(task.get("lang", "py")),
        main=str(config.get("main", "eval.py")),
        sources=[str(s) for s in config.get("sources", [])],
        include_dirs=[str(d) for d in config.get("include_dirs", [])],
        defines={str(k): str(v) for k, v in (config.get("defines") or {}).items()},
        compile_flags=[str(f) for f in config.get("compile_flags", [])] + task_fields.link_flags(task),
        tests=task_fields.cases(task, "tests"),
        benchmarks=task_fields.cases(task, benchmarks),
        ranking_by=str(task.get("ranking_by", DEFAULT_RANKING)),
        evaluator=str(task.get("evaluator", "auto")),
        world_size=task_fields.world_size(task),
    )


def accepted_extensions(task: dict[str, Any]) -> tuple[str, ...]:
    return (".cu", ".cuh") if task.get("lang") == "cu" else (".py",)
