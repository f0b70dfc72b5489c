"""What runs inside the submission's process imports nothing from the rooms that run and judge
the job (issue #40): the child, a rank's child and the profiled child import, wherever in their
code, only the modules listed here, and those import nothing of kernelcup outside the harness.

A module added to the list is a module the submission can reach and change (harness/integrity.py
watches them); one that must stay out of its reach (the job spec's secrets, the result's key, the
checking and scoring) belongs outside it."""

from __future__ import annotations

import ast
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
ENTRIES = ("child", "rank_child", "profile_child")
INSIDE = frozenset({
    "channel", "child", "cpus", "cudaipc", "cupti", "fingerprint", "integrity", "problem", "profile_child", "protocol",
    "rank_child", "record", "sandbox", "spec", "stats", "timing", "transfer", "verdict", "witness",
})


def imports_of(module: str) -> set[str]:
    """Every kernelcup module ``harness/<module>.py`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse((HARNESS / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kernelcup"):
            if node.module == "kernelcup.harness":
                found |= {f"kernelcup.harness.{alias.name}" for alias in node.names}
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("kernelcup")}
    return found


def reached_from(entries: tuple[str, ...]) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    todo = list(entries)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen[module] = imports_of(module)
        todo += [name.split(".")[2] for name in seen[module] if name.startswith("kernelcup.harness.")]
    return seen


def test_the_submissions_process_imports_only_the_inside_modules() -> None:
    reached = reached_from(ENTRIES)
    outside = {module: sorted(name for name in names if name.startswith("kernelcup.harness.")
                              and name.split(".")[2] not in INSIDE)
               for module, names in reached.items()}
    assert {module: names for module, names in outside.items() if names} == {}
    assert set(reached) <= INSIDE


def test_the_inside_modules_import_nothing_of_kernelcup_beyond_the_harness() -> None:
    beyond = {module: sorted(name for name in imports_of(module) if not name.startswith("kernelcup.harness"))
              for module in INSIDE}
    assert {module: names for module, names in beyond.items() if names} == {}


def test_the_judging_rooms_are_outside() -> None:
    for judging in ("run", "process", "session", "children", "benchmark", "checking", "scoring", "workspace"):
        assert (HARNESS / f"{judging}.py").is_file()
        assert judging not in INSIDE
