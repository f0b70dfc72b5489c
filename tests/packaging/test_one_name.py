"""Each module of kernelcup has one name, ``kernelcup.<part>...``, and is loaded once.

In a checkout the parts live in the top-level folders and ``kernelcup/<part>`` links to them
(kernelcup/__init__.py says why), so from the repository root a bare ``import core`` would load
core/store/db.py a second time, as another module: two engines, two registries, an
``isinstance`` that fails. Each part's ``__init__.py`` refuses its bare name; these tests
check that, that nothing of ours asks for a bare name, and that importing everything loads each
file once.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARTS = ("core", "adapters", "runners", "harness")
# Run as scripts or by tools, never imported: the command lines and Alembic's environment.
NOT_IMPORTED = ("__main__", "kernelcup.core.store.migrations.env")


def python_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed if not name.startswith(("leaderboards/", "kernelcup/")) and
            (ROOT / name).is_file()]


@pytest.mark.parametrize("part", PARTS)
def test_a_part_refuses_its_bare_name(part: str) -> None:
    probe = subprocess.run([sys.executable, "-c", f"import {part}"], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
    assert probe.returncode == 1
    assert f"ImportError: import kernelcup.{part}, not {part}" in probe.stderr


def test_no_code_of_ours_imports_a_part_by_its_bare_name() -> None:
    bare: list[str] = []
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            bare += [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for name in names
                     if name.split(".")[0] in PARTS]
    assert bare == []


def test_importing_every_module_loads_each_file_once_under_its_kernelcup_name() -> None:
    # From the repository root, where the bare names are on sys.path, in a fresh interpreter.
    probe = f"""
import json, pkgutil, importlib, sys
from pathlib import Path
import kernelcup
skip = {NOT_IMPORTED!r}
failed = {{}}
for info in pkgutil.walk_packages(kernelcup.__path__, "kernelcup."):
    if info.name.rpartition(".")[2] in skip or info.name in skip:
        continue
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed[info.name] = repr(exc)
files = {{}}
ours = [Path.cwd().resolve() / part for part in {PARTS!r}]
for name, module in list(sys.modules.items()):
    file = getattr(module, "__file__", None)
    if file and any(Path(file).resolve().is_relative_to(part) for part in ours):
        files.setdefault(str(Path(file).resolve()), []).append(name)
print(json.dumps({{"failed": failed, "files": files}}))
"""
    answer = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert answer.returncode == 0, answer.stderr
    found = json.loads(answer.stdout.splitlines()[-1])
    assert found["failed"] == {}
    files: dict[str, list[str]] = found["files"]
    every = {str(path.resolve()) for part in PARTS for path in (ROOT / part).rglob("*.py")
             if path.stem != "__main__" and not path.match("migrations/env.py")}
    assert set(files) == every  # each part was reached through its link, and walked whole
    twice_or_bare = {file: names for file, names in files.items() if len(names) > 1 or names[0].split(".")[0] in PARTS}
    assert twice_or_bare == {}
