"""A file's name as people are shown it.

The name of a submitted file is whatever its uploader wrote, so it is shown (and stored) only as
its last part, without folders (``../../etc/evil.py`` shows as ``evil.py``), without control,
format or bidirectional characters (U+202E would make ``kernel\u202eyp.exe`` read as
``kernelexe.py``), and at most ``MAX_SHOWN`` characters long. Names stored before this rule are
cut the same way wherever they are shown.
"""

from __future__ import annotations

import unicodedata

MAX_SHOWN = 100
UNNAMED = "unnamed"
# Control, format (the bidirectional marks, overrides and isolates among them), surrogates,
# line and paragraph separators: none of them belongs in a name a reader should trust.
_NOT_SHOWN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def shown_file_name(name: str) -> str:
    visible = "".join(char for char in name if unicodedata.category(char) not in _NOT_SHOWN)
    last = visible.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1].strip()
    if last in ("", ".", ".."):
        return UNNAMED
    if len(last) > MAX_SHOWN:
        tail = 20  # keeps the extension in sight
        last = last[: MAX_SHOWN - tail - 1] + "…" + last[-tail:]
    return last
