"""A start without cloning: ``kernelcup init`` writes a folder to run kernelcup in, and
``kernelcup admin sync --from`` loads a problems repository laid out as GPU MODE's
reference-kernels (``problems/<set>/<problem>/task.yml``). Real ``kernelcup`` processes, real
git repositories made here (their problems are written by these tests), real databases."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from kernelcup.adapters.terminal.starter import ENV_FILE, env_example
from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.parsing import parse_line
from kernelcup.core.config import load_settings
from kernelcup.core.messages import Actor, Request
from kernelcup.core.store.db import make_engine, upgrade

ROOT = Path(__file__).resolve().parents[2]
KERNELCUP = [sys.executable, "-m", "kernelcup.adapters.terminal"]


def kernelcup(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The command as a pip user runs it: no KERNELCUP_ setting, so every default is relative to
    ``cwd`` (config/kernelcup.yml, leaderboards/, var/kernelcup.db)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("KERNELCUP_")}
    environ.update({"KERNELCUP_USER": "tester", "COLUMNS": "200", **env})
    return subprocess.run([*KERNELCUP, *args], cwd=cwd, env=environ, text=True, capture_output=True, timeout=240)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=kernelcup test", "-c", "user.email=test@example.invalid",
                    "-c", "init.defaultBranch=main", *args], cwd=repo, check=True, capture_output=True, timeout=60)


def write_problem(folder: Path, description: str, factor: int) -> None:
    """A small problem of our own in GPU MODE's layout: ``utils.py`` shared by its set (``../``)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yml").write_text(
        "files:\n"
        '  - {"name": "submission.py", "source": "@SUBMISSION@"}\n'
        '  - {"name": "task.py", "source": "task.py"}\n'
        '  - {"name": "reference.py", "source": "reference.py"}\n'
        '  - {"name": "utils.py", "source": "../utils.py"}\n'
        f'lang: "py"\ndescription: "{description}"\n'
        'tests:\n  - {"size": 8, "seed": 1}\nbenchmarks:\n  - {"size": 64, "seed": 2}\n'
    )
    (folder / "task.py").write_text("import torch\ninput_t = torch.Tensor\noutput_t = torch.Tensor\n")
    (folder / "reference.py").write_text(
        "import torch\nfrom utils import same\n\n\n"
        "def generate_input(size: int, seed: int) -> torch.Tensor:\n"
        "    return torch.randn(size, generator=torch.Generator().manual_seed(seed))\n\n\n"
        f"def ref_kernel(data: torch.Tensor) -> torch.Tensor:\n    return data * {factor}\n\n\n"
        "def check_implementation(data, output):\n    return same(ref_kernel(data), output)\n"
    )


@pytest.fixture
def problems_repo(tmp_path: Path) -> Path:
    """A git repository as reference-kernels lays one out: two problems and one broken task.yml."""
    repo = tmp_path / "toy-kernels"
    toyset = repo / "problems" / "toyset"
    write_problem(toyset / "scale_py", "Scale a vector by 2.", 2)
    write_problem(toyset / "negate_py", "Negate a vector.", -1)
    (toyset / "utils.py").write_text("import torch\n\n\ndef same(a, b):\n    return torch.allclose(a, b), ''\n")
    (toyset / "broken").mkdir()
    (toyset / "broken" / "task.yml").write_text("files: [unclosed\n")
    (repo / "README.md").write_text("Toy problems for kernelcup's tests.\n")
    repo.mkdir(exist_ok=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two problems and a broken one")
    return repo


@pytest.fixture
def cup(tmp_path: Path) -> Path:
    done = kernelcup(tmp_path, "init", "cup")
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "cup"


def rows(output: str) -> dict[str, str]:
    """A Rich table's rows by their first cell."""
    found: dict[str, str] = {}
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if len(cells) >= 2 and cells[0] and cells[0] != "leaderboard":
            found.setdefault(cells[0], cells[1])
    return found


def test_init_writes_a_folder_where_list_shows_the_shipped_leaderboards(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "init", "cup")
    assert done.returncode == 0, done.stdout + done.stderr
    cup = tmp_path / "cup"
    assert "cd cup" in done.stdout and "kernelcup list" in done.stdout and "kernelcup submit test" in done.stdout
    assert (cup / "config" / "kernelcup.yml").read_bytes() == (ROOT / "config" / "kernelcup.yml").read_bytes()
    assert (cup / "leaderboards" / "vectoradd" / "task.yml").is_file()
    assert (cup / "leaderboards" / "utils.py").is_file()  # shared by the Python leaderboards (../utils.py)
    assert (cup / ".env.example").is_file()
    assert not list(cup.rglob("__pycache__"))
    listed = kernelcup(cup, "list")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    for name in ("vectoradd", "identity", "matmul", "vectoradd_cuda"):
        assert name in rows(listed.stdout), listed.stdout
    assert (cup / "var" / "kernelcup.db").is_file()  # the database is the folder's own


def test_list_in_a_folder_without_leaderboards_tells_an_admin_how_to_get_some(tmp_path: Path) -> None:
    done = kernelcup(tmp_path, "list")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "There are no leaderboards yet." in said and "kernelcup init DIR" in said and "admin sync --from" in said


def test_init_twice_refuses_without_force_and_replaces_only_its_files_with_it(cup: Path) -> None:
    config = cup / "config" / "kernelcup.yml"
    config.write_text("# mine\n")
    (cup / "leaderboards" / "mine").mkdir()
    (cup / "leaderboards" / "mine" / "task.yml").write_text("# my own leaderboard\n")
    again = kernelcup(cup.parent, "init", "cup")
    assert again.returncode == 1
    assert "already exist" in again.stderr and "nothing was written" in again.stderr and "--force" in again.stderr
    assert "Traceback" not in again.stderr
    assert config.read_text() == "# mine\n"
    forced = kernelcup(cup.parent, "init", "cup", "--force")
    assert forced.returncode == 0, forced.stderr
    assert config.read_bytes() == (ROOT / "config" / "kernelcup.yml").read_bytes()
    assert (cup / "leaderboards" / "mine" / "task.yml").read_text() == "# my own leaderboard\n"


def test_kernelcup_run_in_the_folder_reads_its_config_unless_kernelcup_config_names_another(cup: Path) -> None:
    config = cup / "config" / "kernelcup.yml"
    config.write_text(config.read_text().replace("default_deadline_days: 365", "default_deadline_days: 0"))
    done = kernelcup(cup, "list")
    assert done.returncode == 4 and "default_deadline_days must be from 1" in done.stderr, done.stderr
    elsewhere = kernelcup(cup, "list", KERNELCUP_CONFIG=str(ROOT / "config" / "kernelcup.yml"))
    assert elsewhere.returncode == 0 and "vectoradd" in elsewhere.stdout, elsewhere.stderr


def test_init_into_a_file_is_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("")
    done = kernelcup(tmp_path, "init", "taken")
    assert done.returncode == 1 and "is a file, not a folder" in done.stderr and "Traceback" not in done.stderr


def test_env_example_names_every_secret_the_code_reads_without_a_value() -> None:
    text = env_example()
    assigned = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert assigned and all(re.fullmatch(r"[A-Z][A-Z0-9_]*=", line) for line in assigned), assigned
    named = {line.removesuffix("=") for line in assigned}
    lines = text.splitlines()
    for index, line in enumerate(lines):  # each variable has its one-line comment just above it
        if line in assigned:
            assert lines[index - 1].startswith("# "), line
    # Every token or secret name the code reads, as a string constant anywhere in it.
    secrets: set[str] = set()
    for part in ("core", "adapters", "runners"):
        for path in (ROOT / part).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    secrets.update(re.findall(r"\b[A-Z][A-Z0-9]*_(?:[A-Z0-9]+_)*(?:TOKEN|SECRET)(?:_ID)?\b",
                                              node.value))
    assert {"DISCORD_TOKEN", "SLACK_BOT_TOKEN", "GITHUB_TOKEN", "MODAL_TOKEN_ID"} <= secrets
    assert secrets <= named, sorted(secrets - named)
    assert {"KERNELCUP_DATABASE_URL", "KERNELCUP_CONFIG", "KERNELCUP_LEADERBOARDS_DIR"} <= named
    assert ENV_FILE.name == ".env.example"


def test_sync_from_a_local_git_repository_creates_each_problem_and_names_the_broken_task_yml(
        cup: Path, problems_repo: Path) -> None:
    done = kernelcup(cup, "admin", "sync", "--from", str(problems_repo))
    assert done.returncode == 1, done.stdout + done.stderr  # one folder could not be loaded
    synced = rows(done.stdout)
    assert synced["scale_py"] == "created" and synced["negate_py"] == "created", done.stdout
    assert "problems/toyset/broken/task.yml" in done.stdout and "not valid YAML" in done.stdout
    assert synced["broken"].startswith("skipped")
    listed = rows(kernelcup(cup, "list").stdout)
    assert {"scale_py", "negate_py", "vectoradd"} <= listed.keys() and "broken" not in listed
    shown = kernelcup(cup, "task", "scale_py")
    assert shown.returncode == 0 and "Scale a vector by 2." in shown.stdout


def test_a_second_sync_after_a_commit_updates_the_changed_problem_and_duplicates_nothing(
        cup: Path, problems_repo: Path) -> None:
    assert kernelcup(cup, "admin", "sync", "--from", str(problems_repo)).returncode == 1
    write_problem(problems_repo / "problems" / "toyset" / "scale_py", "Scale a vector by 3.", 3)
    git(problems_repo, "commit", "-q", "-am", "scale by 3")
    again = kernelcup(cup, "admin", "sync", "--from", str(problems_repo))
    synced = rows(again.stdout)
    assert synced["scale_py"] == "updated" and synced["negate_py"] == "unchanged", again.stdout
    shown = kernelcup(cup, "task", "scale_py")
    assert "Scale a vector by 3." in shown.stdout and "data * 3" in shown.stdout
    listed = kernelcup(cup, "list").stdout
    assert len(re.findall(r"│ scale_py ", listed)) == 1
    clones = list((cup / "leaderboards" / ".sources").iterdir())
    assert len(clones) == 1 and clones[0].name.startswith("toy-kernels-")  # swapped in place, nothing left over


def test_a_problem_named_like_a_leaderboard_from_elsewhere_is_left_alone(cup: Path, problems_repo: Path) -> None:
    write_problem(problems_repo / "problems" / "toyset" / "vectoradd", "Not the shipped vectoradd.", 5)
    git(problems_repo, "add", "-A")
    git(problems_repo, "commit", "-q", "-m", "a vectoradd of its own")
    assert kernelcup(cup, "list").returncode == 0  # the shipped vectoradd, loaded first
    done = kernelcup(cup, "admin", "sync", "--from", str(problems_repo))
    assert "already exists from" in rows(done.stdout)["vectoradd"], done.stdout
    assert "Not the shipped vectoradd." not in kernelcup(cup, "task", "vectoradd").stdout


def test_a_plain_folder_syncs_where_it_is_and_a_missing_one_is_one_line(cup: Path, problems_repo: Path) -> None:
    # No git repository of its own: read in place; a relative path is the terminal's own.
    folder = Path("..") / problems_repo.name / "problems"
    assert (cup / folder).is_dir()
    done = kernelcup(cup, "admin", "sync", "--from", str(folder))
    assert rows(done.stdout)["negate_py"] == "created", done.stdout
    assert not (cup / "leaderboards" / ".sources").exists()
    missing = kernelcup(cup, "admin", "sync", "--from", str(cup / "nowhere"))
    assert missing.returncode == 1 and "There is no folder" in missing.stdout + missing.stderr


def test_a_terminal_user_who_is_no_admin_is_refused(cup: Path, problems_repo: Path) -> None:
    done = kernelcup(cup, "admin", "sync", "--from", str(problems_repo), KERNELCUP_ROLES__ADMIN="discord:1")
    assert done.returncode == 1 and "Only admins may use sync." in done.stdout + done.stderr
    assert not (cup / "leaderboards" / ".sources").exists()


class NoRunner:
    name = "local"

    def gpus(self) -> list[str]:
        return ["cpu"]


@pytest.fixture
def chat_app(tmp_path: Path) -> Iterator[Kernelcup]:
    engine: Engine = make_engine(f"sqlite:///{tmp_path}/chat.db")
    upgrade(engine)
    settings = replace(load_settings(env={}), leaderboards_dir=tmp_path / "leaderboards",
                       roles={"admin": ["discord:1"], "creator": []})
    yield Kernelcup(settings, engine, {"local": NoRunner()})  # type: ignore[dict-item]
    engine.dispose()


async def test_a_chat_user_is_refused_and_a_chat_admin_cannot_name_a_path_of_the_bot(
        chat_app: Kernelcup, problems_repo: Path) -> None:
    _, args = parse_line(f"/admin sync --from {problems_repo}")
    user = await chat_app.handle(Request(Actor("discord:42", "bob"), "sync", dict(args)))
    assert not user.ok and user.problem is not None and user.problem.kind == "forbidden"
    assert "Only admins may use sync." in user.text()
    for source in (str(problems_repo), problems_repo.as_uri()):
        admin = await chat_app.handle(Request(Actor("discord:1", "ada"), "sync", {"source": source}))
        assert not admin.ok and "Only the bot's own terminal" in admin.text(), admin.text()
    assert not (chat_app.settings.leaderboards_dir / ".sources").exists()


async def test_a_clone_that_fails_says_gits_reason_without_the_password(chat_app: Kernelcup) -> None:
    url = "https://someone:hunter2@127.0.0.1:1/toy-kernels.git"  # nothing listens on port 1
    reply = await chat_app.handle(Request(Actor("discord:1", "ada"), "sync", {"source": url}))
    assert not reply.ok and "Cannot clone https://127.0.0.1:1/toy-kernels.git" in reply.text(), reply.text()
    assert "hunter2" not in reply.text()


def test_a_chat_line_takes_from_and_source_alike() -> None:
    assert parse_line("/admin sync --from https://example.org/r.git") == ("sync", {"source": "https://example.org/r.git"})
    assert parse_line("/admin sync --source=x") == ("sync", {"source": "x"})


async def test_a_source_that_reads_as_an_option_of_git_is_refused(chat_app: Kernelcup, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    request = Request(Actor("discord:1", "ada"), "sync", {"source": f"--upload-pack=touch {marker}"},
                      from_this_machine=True)
    reply = await chat_app.handle(request)
    assert not reply.ok and "is not a git URL or a folder" in reply.text(), reply.text()
    assert not marker.exists()
