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

from core.errors import UserError
from harness.spec import TaskConfig

SUBMISSION_MARK = "@SUBMISSION@"
MAX_TASK_FILE_BYTES = 4 * 1024 * 1024
RANKINGS = ("last", "mean", "geom")


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


def read_task_folder(folder: Path, name: str | None = None) -> TaskFolder:
    """Load ``folder/task.yml`` and the files it names (sources may point outside, e.g. ../utils.py)."""
    task_yml = folder / "task.yml"
    if not task_yml.is_file():
        raise UserError(f"{folder} has no task.yml", "A leaderboard folder needs task.yml, task.py and reference.py.")
    task = parse_task_yml(task_yml.read_text(encoding="utf-8"))

    def read(source: str) -> str:
        path = (folder / source).resolve()
        if not path.is_file():  # an uploaded bundle carries ../utils.py beside task.yml
            path = folder / Path(source).name
        if not path.is_file():
            raise UserError(f"task.yml names {source}, which is not in {folder}")
        if path.stat().st_size > MAX_TASK_FILE_BYTES:
            raise UserError(f"{source} is larger than {MAX_TASK_FILE_BYTES // 1024} KiB")
        return path.read_text(encoding="utf-8")

    files = {
        str(entry["name"]): read(str(entry["source"]))
        for entry in task["files"]
        if entry["source"] != SUBMISSION_MARK
    }
    templates = {str(lang): read(str(source)) for lang, source in (task.get("templates") or {}).items()}
    return TaskFolder(name=name or folder.name, task=task, files=files, templates=templates)


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
    for key in ("tests", "benchmarks"):
        cases = task.get(key, [])
        if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
            raise UserError(f"task.yml: `{key}` must be a list of keyword-argument mappings")
    if not task.get("tests"):
        raise UserError("task.yml: at least one test case is needed")
    if task.get("ranking_by", "geom") not in RANKINGS:
        raise UserError(f"task.yml: `ranking_by` must be one of {', '.join(RANKINGS)}")


def submission_file_name(task: dict[str, Any]) -> str:
    return next(str(f["name"]) for f in task["files"] if f["source"] == SUBMISSION_MARK)


def task_config(task: dict[str, Any]) -> TaskConfig:
    config = task.get("config") or {}
    return TaskConfig(
        lang=str(task.get("lang", "py")),
        main=str(config.get("main", "eval.py")),
        sources=[str(s) for s in config.get("sources", [])],
        include_dirs=[str(d) for d in config.get("include_dirs", [])],
        defines={str(k): str(v) for k, v in (config.get("defines") or {}).items()},
        compile_flags=[str(f) for f in config.get("compile_flags", [])],
        tests=list(task.get("tests", [])),
        benchmarks=list(task.get("benchmarks", [])),
        ranking_by=str(task.get("ranking_by", "geom")),
    )


def accepted_extensions(task: dict[str, Any]) -> tuple[str, ...]:
    return (".cu", ".cuh") if task.get("lang") == "cu" else (".py",)
