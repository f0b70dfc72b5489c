"""Finding the leaderboard folders under ``leaderboards_dir``: kernelcup's layout and GPU MODE's.

kernelcup's: one folder per leaderboard, each with its ``task.yml``. GPU MODE's
reference-kernels: ``problems/<set>/<problem>/task.yml``, files shared by a set in ``<set>/``
(task.yml names them ``../utils.py``), and ``problems/<set>.yaml`` listing each problem's
``directory``, leaderboard ``name``, ``gpus`` and ``deadline`` (the set's own ``deadline`` where
a problem names none). Pointing ``leaderboards_dir`` at
``problems/`` or at one ``problems/<set>/`` finds every problem, named as GPU MODE names it,
so a GPU MODE submission's ``#!POPCORN leaderboard <name>`` line finds its leaderboard.
Folders without a set entry are named after themselves; where two share a name, after their
set as well (``pmpp_prefixsum_py``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class FoundFolder:
    name: str
    folder: Path
    gpus: list[str] = field(default_factory=list)  # from a set's yaml; empty when it names none
    deadline: Any = None  # from a set's yaml, as YAML read it (a string, a date); None when it names none


FOLDER_LEVELS = 2  # leaderboards_dir/<leaderboard>/ and GPU MODE's problems/<set>/<problem>/


def find_task_folders(root: Path, levels: int = FOLDER_LEVELS) -> tuple[list[FoundFolder], dict[str, str]]:
    """Every leaderboard folder under ``root`` (one to ``levels`` levels down; hidden folders and
    ``__pycache__`` never), and what could not be read."""
    errors: dict[str, str] = {}
    folders = [
        path.parent
        for pattern in ("*/" * depth + "task.yml" for depth in range(1, levels + 1))
        for path in sorted(root.glob(pattern))
        if not any(part.startswith((".", "__")) for part in path.relative_to(root).parts)
    ]
    listed = _set_entries(root, errors)
    named = [replace(listed[folder.resolve()], folder=folder) if folder.resolve() in listed
             else FoundFolder(folder.name, folder) for folder in folders]
    counts = Counter(entry.name for entry in named)
    found: list[FoundFolder] = []
    taken: set[str] = set()
    for entry in named:
        folder = entry.folder
        if counts[entry.name] > 1 and folder.parent != root:
            entry = replace(entry, name=f"{folder.parent.name}_{entry.name}")
        if entry.name in taken:
            errors[str(folder.relative_to(root))] = f"another folder already gives the leaderboard name {entry.name!r}"
            continue
        taken.add(entry.name)
        found.append(entry)
    return found, errors


def _set_entries(root: Path, errors: dict[str, str]) -> dict[Path, FoundFolder]:
    """GPU MODE's problem-set files that can name folders under ``root``: ``root/<set>.yaml``,
    and ``<set>.yaml`` beside ``root`` when ``root`` is one set's folder."""
    candidates = sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
    beside = root.parent / f"{root.name}.yaml"
    if beside.is_file():
        candidates.append(beside)
    entries: dict[Path, FoundFolder] = {}
    for path in candidates:
        try:
            raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            errors[path.name] = f"not a readable problem-set file: {exc}"
            continue
        problems = raw.get("problems") if isinstance(raw, dict) else None
        if not isinstance(problems, list):
            continue  # some other YAML file
        for problem in problems:
            if isinstance(problem, dict) and problem.get("directory") and problem.get("name"):
                folder = (path.parent / str(problem["directory"])).resolve()
                gpus = [str(g) for g in problem.get("gpus") or []]
                deadline = problem.get("deadline") or raw.get("deadline")
                entries[folder] = FoundFolder(str(problem["name"]), folder, gpus, deadline)
    return entries
