"""No production function is longer than a screen and a half (issue #40): a longer one is a class
or two functions waiting to be written. Migrations are generated and exempt."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROOMS = ("core", "adapters", "runners", "harness")
MAX_LINES = 80


def long_functions() -> list[str]:
    found = []
    for room in ROOMS:
        for path in sorted((ROOT / room).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_LINES:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_production_function_is_longer_than_80_lines() -> None:
    assert long_functions() == []
