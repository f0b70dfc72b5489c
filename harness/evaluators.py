"""Which evaluator runs a Python leaderboard: kernelcup's harness, or the leaderboard's own.

GPU MODE's standard ``eval.py`` is the same for every problem: it imports ``custom_kernel``
from ``submission`` and ``generate_input`` / ``check_implementation`` from ``reference``.
kernelcup runs such a leaderboard with its own harness, which does what that file does
(isolated, cross-checked), and never runs the file. Some leaderboards ship an ``eval.py`` of
their own instead: it generates its inputs, calls functions the submission defines under other
names and times them itself, and ``reference.py`` has no ``generate_input``. Those run with
their evaluator (``harness/own_eval.py``), through the POPCORN_FD protocol.

The choice reads ``reference.py`` without running it (standard library only: the core asks
too). task.yml's ``evaluator: standard | custom`` overrides it; ``auto`` is the default.
"""

from __future__ import annotations

import ast

from kernelcup.harness.spec import TaskConfig

EVALUATORS = ("auto", "standard", "custom")
STANDARD_NAMES = frozenset({"generate_input", "check_implementation"})


def top_level_names(source: str) -> set[str]:
    """Names a module defines at its top level (functions, classes, assignments, imports)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def uses_own_evaluator(task: TaskConfig, files: dict[str, str]) -> bool:
    """True when a Python leaderboard runs with its own ``config.main`` instead of the harness.

    ``auto``: when its entry file is among its files and ``reference.py`` (if any) lacks
    ``generate_input`` or ``check_implementation``, the two functions the standard evaluator
    needs. A ``reference.py`` that does not parse leaves the choice to the harness, which then
    reports why it cannot import it.
    """
    if task.lang != "py" or task.evaluator == "standard":
        return False
    if task.evaluator == "custom":
        return True
    if task.main not in files:
        return False
    reference = files.get("reference.py")
    if reference is None:
        return True
    try:
        ast.parse(reference)
    except (SyntaxError, ValueError):
        return False
    return not top_level_names(reference) >= STANDARD_NAMES
