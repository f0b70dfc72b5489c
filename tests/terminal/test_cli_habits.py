"""What contestants do every day from a terminal: popcorn's habits (``--mode``, a missing
leaderboard asked for), ``--json`` for scripts, the reasons in ``mine``, the task's files and
description, ``--help``. A real CLI process on a real database, as in test_cli.py."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

from tests.terminal.test_cli import KERNELCUP, ROOT, kernelcup

SOLUTION = ROOT / "leaderboards/identity/solutions/pytorch.py"
WRONG = ROOT / "leaderboards/identity/solutions/wrong_offbyone.py"


def unnamed_kernel(tmp_path: Path) -> Path:
    """The identity solution without its ``#!POPCORN`` lines: no leaderboard named anywhere."""
    path = tmp_path / "kernel.py"
    lines = SOLUTION.read_text().splitlines(keepends=True)
    path.write_text("".join(line for line in lines if not line.startswith("#!POPCORN")))
    return path


def test_submit_takes_the_mode_as_an_option_and_prints_the_apis_reply_with_json(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "submit", "--json", "--mode", "test", str(SOLUTION))
    assert done.returncode == 0, done.stdout + done.stderr
    document = json.loads(done.stdout)  # one document, nothing else on stdout
    assert document["ok"] is True and document["problem"] is None
    assert isinstance(document["submission_id"], int)
    assert document["blocks"][0] == {"type": "text", "style": "title", "text": document["text"].split("\n")[0]}
    assert "(test)" in document["blocks"][0]["text"] and "all 5 tests passed" in document["text"]


def test_a_failing_submission_keeps_exit_one_with_json(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "submit", str(WRONG), "--mode", "test", "--output", "json")
    assert done.returncode == 1
    document = json.loads(done.stdout)
    assert document["ok"] is False and "❌" in document["text"]


def test_a_command_that_gets_no_reply_prints_the_apis_error_shape(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "submit", "test", "nowhere.py", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout) == {"detail": "There is no file nowhere.py.", "hint": "", "kind": "invalid",
                                       "choices": None}


def test_reads_print_a_reply_with_json(tmp_path: Path) -> None:
    listed = kernelcup(tmp_path, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    table = json.loads(listed.stdout)["blocks"][0]
    assert table["type"] == "table" and table["columns"][0] == "leaderboard"
    assert "identity" in [row[0] for row in table["rows"]]
    missing = kernelcup(tmp_path, "show", "nosuch", "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["problem"] == {"kind": "not_found", "retry_after_s": None}


def test_a_missing_leaderboard_without_a_terminal_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "submit", "test", str(unnamed_kernel(tmp_path)), stdin="")
    assert done.returncode == 1
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, done.stdout
    assert lines[0].startswith("Which leaderboard is this for? Choose with --leaderboard: ")
    assert "identity" in lines[0] and "vectoradd" in lines[0]


def test_a_missing_leaderboard_on_a_terminal_is_asked_for(tmp_path: Path) -> None:
    kernel = unnamed_kernel(tmp_path)
    environ = {**os.environ, "KERNELCUP_DATABASE_URL": f"sqlite:///{tmp_path}/kernelcup.db",
               "KERNELCUP_LEADERBOARDS_DIR": str(ROOT / "leaderboards"), "KERNELCUP_USER": "tester", "COLUMNS": "200"}
    leader, follower = pty.openpty()  # stdin is a terminal; stdout and stderr stay pipes
    try:
        process = subprocess.Popen([*KERNELCUP, "submit", "test", str(kernel)], cwd=tmp_path, env=environ,
                                   stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        os.close(follower)
        assert process.stderr is not None
        asked = _read_until(process.stderr, "leaderboard (number or name): ")
        assert "Which leaderboard is this for?" in asked and ". identity" in asked
        os.write(leader, b"identity\n")
        out, _ = process.communicate(timeout=240)
    finally:
        os.close(leader)
    assert process.returncode == 0, out
    assert "to identity (test)" in out and "all 5 tests passed" in out


def _read_until(stream: object, wanted: str, budget_s: float = 120.0) -> str:
    """What the process wrote to ``stream`` until ``wanted`` (a prompt ends without a newline)."""
    fd = stream.fileno()  # type: ignore[attr-defined]
    seen = b""
    deadline = time.monotonic() + budget_s
    while wanted.encode() not in seen:
        assert time.monotonic() < deadline, seen.decode(errors="replace")
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, "the CLI ended before asking:\n" + seen.decode(errors="replace")
            seen += chunk
    return seen.decode()


def test_mine_says_why_a_run_failed(tmp_path: Path) -> None:
    assert kernelcup(tmp_path, "submit", "test", str(WRONG)).returncode == 1
    done = kernelcup(tmp_path, "mine", "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)["blocks"][0]["rows"][0][-1]
    assert outcome.startswith("cpu: failed: test 1 of 5"), outcome


def test_a_benchmark_result_names_its_score_once(tmp_path: Path) -> None:
    # vectoradd: a shipped leaderboard whose benchmarks have CPU sizes (cpu_benchmarks)
    done = kernelcup(tmp_path, "submit", "benchmark", str(ROOT / "leaderboards/vectoradd/solutions/pytorch.py"))
    assert done.returncode == 0, done.stdout + done.stderr
    verdict = next(line for line in done.stdout.splitlines() if "✅" in line)
    assert verdict.count("score") == 1, verdict


def test_task_files_go_to_a_folder_per_leaderboard_and_the_description_is_drawn(tmp_path: Path) -> None:
    vectoradd = kernelcup(tmp_path, "task", "vectoradd")
    identity = kernelcup(tmp_path, "task", "identity")
    assert vectoradd.returncode == identity.returncode == 0, vectoradd.stderr + identity.stderr
    files = tmp_path / "var" / "files"
    assert (files / "vectoradd" / "reference.py").read_text() != (files / "identity" / "reference.py").read_text()
    assert "saved to var/files/vectoradd/reference.py" in vectoradd.stdout
    # vectoradd's description has a Markdown list: drawn with bullets, not shown as "- item".
    description = vectoradd.stdout.split("Tests:")[0]
    assert "• A, B: float16 tensors" in description
    assert not any(line.lstrip().startswith("- ") for line in description.splitlines())


def test_help_shows_no_value_for_a_flag(tmp_path: Path) -> None:
    for command in (["--help"], ["submit", "--help"], ["admin", "--help"], ["init", "--help"]):
        done = kernelcup(tmp_path, *command)
        assert done.returncode == 0 and "--help" in done.stdout
        assert "<bool>" not in done.stdout, done.stdout


def test_the_console_chat_takes_the_mode_as_an_option_too(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "serve", stdin=f"/leaderboard submit --mode test {SOLUTION}\n")
    assert done.returncode == 0, done.stderr
    assert "(test) of pytorch.py accepted" in done.stdout and "all 5 tests passed" in done.stdout
