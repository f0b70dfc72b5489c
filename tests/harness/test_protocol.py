"""The harness<->child protocol has one definition (harness/protocol.py) and NOTES.md's tables
describe exactly it: every order and message kind, each field a type names, and nothing more."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from kernelcup.harness import protocol

NOTES = (Path(__file__).resolve().parents[2] / "harness" / "NOTES.md").read_text()


def table(heading: str) -> dict[str, str]:
    """The rows of the table after ``heading``: kind -> its fields column."""
    section = NOTES.split(heading, 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines()[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1]
    return rows


def kinds(union: typing.Any, key: str) -> dict[str, list[type]]:
    found: dict[str, list[type]] = {}
    for member in typing.get_args(union):
        for kind in typing.get_args(typing.get_type_hints(member)[key]):
            found.setdefault(kind, []).append(member)
    return found


@pytest.mark.parametrize(("heading", "union", "key"), [
    ("**Orders** (harness to child):", protocol.Order, "op"),
    ("**Messages** (child to harness):", protocol.Answer, "msg"),
], ids=["orders", "messages"])
def test_every_kind_is_in_the_notes_with_its_fields(heading: str, union: typing.Any, key: str) -> None:
    rows = table(heading)
    found = kinds(union, key)
    assert set(rows) == set(found)
    for kind, members in found.items():
        for member in members:
            for name in set(typing.get_type_hints(member)) - {key}:
                assert f"`{name}`" in rows[kind], (kind, name)


def test_the_child_sends_no_message_the_protocol_lacks() -> None:
    child = (Path(protocol.__file__).with_name("child.py")).read_text()
    assert not re.search(r"""\{\s*["']msg["']""", child), "a message built as a bare dict"
