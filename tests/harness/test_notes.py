"""harness/NOTES.md against the code it describes: the parameter table's values, the module
table's rows, and the JOURNAL.md sections it names.

The notes are the design as the code has it now; these tests fail where the two drift apart, so
a changed constant or a new module comes with its line in the notes.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
NOTES = HARNESS / "NOTES.md"
JOURNAL = HARNESS / "JOURNAL.md"

_CONSTANT = re.compile(r"`(?P<module>[a-z_]+)\.(?P<name>[A-Z][A-Z0-9_]*)`")


def _section(text: str, heading: str) -> str:
    """The text under ``## heading`` up to the next heading of that level."""
    match = re.search(rf"^## {re.escape(heading)}\s*$(?P<body>.*?)(?=^## |\Z)", text, re.MULTILINE | re.DOTALL)
    assert match, f"harness/NOTES.md has no '## {heading}' section"
    return match.group("body")


def _table(body: str) -> list[list[str]]:
    """The rows of the first Markdown table in ``body`` (header and rule left out), as cells."""
    lines = [line.strip() for line in body.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def parameter_rows() -> list[tuple[str, str, str]]:
    """``(module, NAME, value as written)`` for each row of the ``## Parameters`` table."""
    body = _section(NOTES.read_text(encoding="utf-8"), "Parameters")
    header = next(line for line in body.splitlines() if line.startswith("|"))
    assert [cell.strip() for cell in header.strip().strip("|").split("|")] == ["constant", "value", "meaning"]
    rows = []
    for cells in _table(body):
        match = _CONSTANT.fullmatch(cells[0])
        assert match, f"not a `module.NAME` constant: {cells[0]!r}"
        rows.append((match["module"], match["name"], cells[1].strip("`")))
    return rows


def _agrees(actual: object, written: str) -> bool:
    """Numbers compare by value (``2000`` stands for ``2000.0``); anything else by ``repr``."""
    if isinstance(actual, int | float) and not isinstance(actual, bool):
        try:
            return float(written.replace("_", "")) == float(actual)
        except ValueError:
            return False
    return repr(actual) == written


def test_the_parameter_table_holds_the_timing_and_ranking_constants() -> None:
    names = {f"{module}.{name}" for module, name, _ in parameter_rows()}
    assert len(names) >= 10
    for needed in ("stats.RANKED_ROUNDS", "benchmark.RANKED_PLAN", "benchmark.ROUND_OUTLIER", "timing.STEADY_FLOOR_NS"):
        assert needed in names


def test_every_parameter_in_the_notes_has_the_value_the_code_gives_it() -> None:
    wrong = []
    for module_name, name, written in parameter_rows():
        module = importlib.import_module(f"kernelcup.harness.{module_name}")
        assert hasattr(module, name), f"harness/{module_name}.py has no {name}"
        actual = getattr(module, name)
        if not _agrees(actual, written):
            wrong.append(f"{module_name}.{name}: the notes say {written}, the code {actual!r}")
    assert not wrong, "harness/NOTES.md's parameter table differs from the code:\n" + "\n".join(wrong)


def test_every_harness_module_has_a_line_in_the_module_table() -> None:
    rows = _table(_section(NOTES.read_text(encoding="utf-8"), "Modules"))
    listed = {cells[0].strip("`") for cells in rows}
    modules = {path.name for path in HARNESS.glob("*.py") if path.stem not in ("__init__", "__main__")}
    missing = sorted(modules - listed)
    assert not missing, f"modules with no line in harness/NOTES.md's module table: {missing}"
    gone = sorted(name for name in listed - modules if name not in ("__init__.py", "__main__.py"))
    assert not gone, f"harness/NOTES.md's module table lists modules that do not exist: {gone}"


def test_every_journal_section_the_notes_name_exists() -> None:
    headings = {
        re.sub(r"\s*\([^()]*\)$", "", line[3:].strip())
        for line in JOURNAL.read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    }
    notes = " ".join(NOTES.read_text(encoding="utf-8").split())
    named = {
        title
        for names in re.findall(r"JOURNAL\.md,\s*((?:\*[^*]+\*(?:\s*(?:;|,|and)\s*)?)+)", notes)
        for title in re.findall(r"\*([^*]+)\*", names)
    }
    assert named, "harness/NOTES.md names no section of JOURNAL.md"
    assert not sorted(named - headings), f"JOURNAL.md has no section {sorted(named - headings)}"
