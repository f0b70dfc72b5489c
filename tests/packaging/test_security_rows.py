"""Every test SECURITY.md names exists, so no row of the threat model claims a test that is gone.

SECURITY.md names tests in backticks in four ways: a full reference
(``tests/web/test_tokens.py::test_x``, optionally with a parametrize id ``[...]``), a file's
bare name (``test_tokens.py::test_x``: the file of that name named in full earlier in the
document, else the only one under tests/), ``::test_x`` or a bare ``test_x`` (the test in the
file named last), and ``...[id]`` (the test named last, with another id). ``same`` in a row's
test cell means the row above's tests; a row with no test says ``untested`` there. Parametrize
ids are not checked; the test function is.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECURITY = ROOT / "SECURITY.md"

_CODE = re.compile(r"`([^`]+)`")
_FILE = re.compile(r"^(?P<file>(?:[\w.-]+/)*test_\w+\.py)(?:::(?P<test>\w+)(?:\[.*\])?)?$")
_IN_LAST_FILE = re.compile(r"^(?:::)?(?P<test>test_\w+)(?:\[.*\])?$")
_LAST_TEST_AGAIN = re.compile(r"^\.\.\.\[.*\]$")


@dataclass(frozen=True)
class Reference:
    """One test named in the document, resolved against the tests folder."""

    line: int
    place: str  # the row (its first cells) or the prose line that names it
    written: str
    file: Path | None  # None where the name cannot be resolved to one file
    test: str | None  # None where only a file is named
    trouble: str = ""  # why the name could not be resolved


def _place(line: str) -> str:
    if line.startswith("|"):
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        return "row | " + " | ".join(cells[:2]) + " |"
    return "line " + repr(line.strip()[:100])


class _Reader:
    """Reads the references in document order, each continuing the file and test named before it."""

    def __init__(self, tests: Path) -> None:
        self.tests = tests
        self.full_paths: dict[str, Path] = {}  # a file's bare name -> the path named in full last
        self.file: Path | None = None
        self.test: str | None = None
        self.file_trouble = "no file was named before it"
        self.test_trouble = "no test was named before it"

    def _find_file(self, written: str) -> tuple[Path | None, str]:
        if "/" in written:
            path = self.tests.parent / written
            self.full_paths[path.name] = path
            return path, ""
        if written in self.full_paths:
            return self.full_paths[written], ""
        matches = sorted(self.tests.rglob(written))
        if len(matches) == 1:
            return matches[0], ""
        if not matches:
            return None, f"no file {written} under tests/"
        return None, f"{written} is ambiguous ({', '.join(str(m.relative_to(self.tests.parent)) for m in matches)})"

    def read(self, number: int, line: str, written: str) -> Reference | None:
        place = _place(line)
        if found := _FILE.match(written):
            self.file, self.file_trouble = self._find_file(found["file"])
            self.test, self.test_trouble = found["test"], "" if found["test"] else f"{written} names no test"
            return Reference(number, place, written, self.file, self.test, self.file_trouble)
        if found := _IN_LAST_FILE.match(written):
            self.test, self.test_trouble = found["test"], ""
            return Reference(number, place, written, self.file, self.test, self.file_trouble)
        if _LAST_TEST_AGAIN.match(written):
            return Reference(number, place, written, self.file, self.test, self.file_trouble or self.test_trouble)
        return None


def references(markdown: str, tests: Path) -> list[Reference]:
    reader = _Reader(tests)
    found: list[Reference] = []
    for number, line in enumerate(markdown.splitlines(), start=1):
        for written in _CODE.findall(line):
            if (reference := reader.read(number, line, written)) is not None:
                found.append(reference)
    return found


def collected_tests(path: Path) -> set[str]:
    """The test functions pytest collects from a file: module level, and in ``Test*`` classes."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bodies = [tree.body] + [node.body for node in tree.body if isinstance(node, ast.ClassDef)
                            and node.name.startswith("Test")]
    return {node.name for body in bodies for node in body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_")}


def problems(found: list[Reference], root: Path) -> list[str]:
    said: list[str] = []
    for reference in found:
        where = f"SECURITY.md:{reference.line} {reference.place} names `{reference.written}`"
        if reference.file is None:
            said.append(f"{where}: {reference.trouble}")
        elif not reference.file.is_file():
            said.append(f"{where}: {reference.file.relative_to(root)} does not exist")
        elif reference.test is None:
            if not collected_tests(reference.file):
                said.append(f"{where}: {reference.file.relative_to(root)} has no test")
        elif reference.test not in collected_tests(reference.file):
            said.append(f"{where}: {reference.file.relative_to(root)} has no test {reference.test}")
    return said


def rows_without_a_test(markdown: str, tests: Path) -> list[str]:
    """Rows of a table whose last column is ``test`` that name no test, say ``same`` or ``untested``."""
    said: list[str] = []
    in_test_table = False
    for number, line in enumerate(markdown.splitlines(), start=1):
        if not line.startswith("|"):
            in_test_table = False
            continue
        cell = line.strip().strip("|").split("|")[-1].strip()
        if cell == "test":
            in_test_table = True
            continue
        divider = set(cell) <= set("-: ")
        says_so = cell == "same" or "untested" in cell
        if in_test_table and not divider and not says_so and not references(line, tests):
            said.append(f"SECURITY.md:{number} {_place(line)} names no test: {cell!r}")
    return said


def test_every_test_security_md_names_exists() -> None:
    markdown = SECURITY.read_text()
    found = references(markdown, ROOT / "tests")
    assert len(found) > 90, f"only {len(found)} test references read: the reader no longer understands the rows"
    assert not problems(found, ROOT), "\n".join(problems(found, ROOT))


def test_every_row_of_security_md_names_its_test() -> None:
    markdown = SECURITY.read_text()
    assert not rows_without_a_test(markdown, ROOT / "tests"), "\n".join(rows_without_a_test(markdown, ROOT / "tests"))


def test_a_row_naming_a_missing_file_or_test_is_reported_by_its_row(tmp_path: Path) -> None:
    """The check can fail: every way of naming a test is read, and each broken name is reported."""
    (tmp_path / "tests" / "web").mkdir(parents=True)
    (tmp_path / "tests" / "web" / "test_real.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('x', [1])\ndef test_one(x): ...\n\n"
        "async def test_two(): ...\n\nclass TestKind:\n    def test_three(self): ...\n\n"
        "def helper():\n    def test_nested(): ...\n")
    (tmp_path / "tests" / "a").mkdir()
    (tmp_path / "tests" / "b").mkdir()
    (tmp_path / "tests" / "a" / "test_twice.py").write_text("def test_x(): ...\n")
    (tmp_path / "tests" / "b" / "test_twice.py").write_text("def test_x(): ...\n")
    markdown = "\n".join([
        "| surface | attack | test |",
        "|---|---|---|",
        "| s1 | fine | `tests/web/test_real.py::test_one[1]`, `::test_two` |",
        "| s2 | fine | `test_real.py::test_three`, `...[2]` |",
        "| s3 | fine | same |",
        "| s4 | deleted test | `tests/web/test_real.py::test_gone` |",
        "| s5 | continued, deleted | `test_real.py::test_one`, `::test_gone_too` |",
        "| s6 | bare, deleted | `test_gone_three` |",
        "| s7 | deleted file | `tests/web/test_missing.py::test_one` |",
        "| s8 | nested is not a test | `test_real.py::test_nested` |",
        "| s9 | ambiguous | `test_twice.py::test_x` |",
        "| s10 | no test named | `harness/sandbox.py` |",
        "| s11 | said so | untested: no test yet |",
    ])
    tests = tmp_path / "tests"
    said = problems(references(markdown, tests), tmp_path)
    broken = {"s4": "has no test test_gone", "s5": "has no test test_gone_too", "s6": "has no test test_gone_three",
              "s7": "test_missing.py does not exist", "s8": "has no test test_nested", "s9": "ambiguous"}
    for row, why in broken.items():
        assert [line for line in said if f"| {row} |" in line and why in line], (row, said)
    assert len(said) == len(broken), said
    assert [line for line in rows_without_a_test(markdown, tests) if "| s10 |" in line]
    assert len(rows_without_a_test(markdown, tests)) == 1
