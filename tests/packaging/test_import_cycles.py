"""No import circle among kernelcup's own modules: every import counts, at the top of a module, in
a function or under ``TYPE_CHECKING``, since each one says that a module needs the other."""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kernelcup",)  # its parts are links to the top-level folders: walked through them


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in packages:
        for folder, dirs, files in os.walk(root / package, followlinks=True):
            dirs.sort()
            for file in sorted(f for f in files if f.endswith(".py")):
                path = Path(folder) / file
                parts = path.relative_to(root).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                found[name] = path
    return found


def _own_module(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that an imported name lives in
    (``kernelcup.core.store.db.session_scope`` -> ``kernelcup.core.store.db``)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    wanted: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wanted.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            wanted.update(f"{base}.{alias.name}" for alias in node.names)
    found = {_own_module(each, modules) for each in wanted}
    return {module for module in found if module is not None and module != name}


def import_cycles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """Each group of modules that reach one another through imports (Tarjan's components)."""
    modules = module_files(root, packages)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group: list[str] = []
            while not group or group[-1] != node:
                group.append(stack.pop())
            if len(group) > 1:
                cycles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_no_module_of_kernelcup_imports_itself_through_others() -> None:
    assert import_cycles(ROOT, PACKAGES) == []


def test_a_circle_through_a_type_only_or_relative_import_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n")
    (pkg / "b.py").write_text("def f():\n    from . import c\n")
    (pkg / "c.py").write_text("from .a import A\n")
    (pkg / "d.py").write_text("import pkg.a\n")  # reaches the circle but is not part of it
    assert import_cycles(tmp_path, ("pkg",)) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_the_walk_reaches_every_part_through_kernelcups_links() -> None:
    names = module_files(ROOT, PACKAGES)
    assert {"kernelcup.core.store.db", "kernelcup.adapters.terminal.cli", "kernelcup.runners.local",
            "kernelcup.harness.run"} <= names.keys()
