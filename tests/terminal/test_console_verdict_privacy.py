"""``kernelcup get-submission`` at the terminal (the embedded CLI, a ``console:`` identity), of
another user's failed run in the real harness (SECURITY.md, *What a submission shows whom*).

Where the operator did not make every console user an admin (the shipped ``console:*``), Alice
submits at the terminal a kernel that raises ``ValueError`` quoting a marker; Eve, another
console user of the same database, looks it up from a folder of her own. What the command prints
and the files it saves for her tell the status and public verdict only: no exception text, logs
or code. Alice's own look-up quotes the marker (the control)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.terminal.test_cli import kernelcup

pytestmark = pytest.mark.slow

MARKER = "SECRET-MARKER-123"
RAISES = f'''#!POPCORN leaderboard identity
#!POPCORN gpus cpu
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    print("stdout of the kernel")
    raise ValueError("{MARKER}")
'''


def test_get_submission_at_the_terminal_shows_another_console_user_no_exception_text_logs_or_code(
    tmp_path: Path,
) -> None:
    alice, eve = tmp_path / "alice", tmp_path / "eve"
    alice.mkdir(mode=0o700)
    eve.mkdir(mode=0o700)
    shared = {"KERNELCUP_DATABASE_URL": f"sqlite:///{alice}/kernelcup.db", "KERNELCUP_ROLES__ADMIN": "console:root"}
    (alice / "raises.py").write_text(RAISES)
    submitted = kernelcup(alice, "submit", "test", "raises.py", KERNELCUP_USER="alice", **shared)
    assert submitted.returncode == 1 and "❌" in submitted.stdout, submitted.stdout + submitted.stderr

    seen = kernelcup(eve, "get-submission", "1", KERNELCUP_USER="eve", **shared)
    assert seen.returncode == 0, seen.stdout + seen.stderr
    saved = "".join(f"{path}\n{path.read_text(errors='replace')}" for path in (eve / "var" / "files").rglob("*")
                    if path.is_file())
    for text, where in ((seen.stdout + seen.stderr, "printed"), (saved, "saved")):
        assert MARKER not in text and "stdout of the kernel" not in text and "custom_kernel" not in text, (where,
                                                                                                          text)
    assert "crashed" in seen.stdout

    own = kernelcup(alice, "get-submission", "1", KERNELCUP_USER="alice", **shared)
    assert own.returncode == 0 and MARKER in own.stdout, own.stdout + own.stderr
