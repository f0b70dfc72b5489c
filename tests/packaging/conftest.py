"""The packaging tests read our sources with ``ast.parse``, hundreds of files in one test."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def no_garbage_collection_inside_ast_parse() -> Iterator[None]:
    """CPython 3.11's ``ast.parse`` is not re-entrant. A collection inside it can finalize what an
    earlier test in the same process left behind (an asyncio task whose exception nobody read),
    whose logged traceback is parsed again for its ``^^^`` marks, and the outer parse then fails
    with "AST constructor recursion depth mismatch" (seen under pytest-xdist, where the discord
    tests ran just before in the same worker)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
