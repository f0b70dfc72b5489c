"""``kernelcup init [DIR]``: a folder to run kernelcup in, for someone who installed it with pip.

It writes the shipped leaderboards (``leaderboards/``), the documented defaults
(``config/kernelcup.yml``, which kernelcup reads from the working folder) and ``.env.example``,
which names every variable kernelcup reads from the environment, secrets included, without a
value. The wheel carries the leaderboards as package data (``kernelcup/leaderboards`` links to
the checkout's ``leaderboards/``; pyproject.toml's package-data lists them). Nothing that exists
is overwritten without ``--force``, and nothing is written when something would be.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernelcup.core.config import DEFAULT_CONFIG, LOCAL_CONFIG
from kernelcup.core.errors import UserError

# This file's path keeps the package's links (kernelcup/__init__.py): the package's own
# ``leaderboards``, in a checkout and in site-packages alike.
SHIPPED_LEADERBOARDS = Path(__file__).absolute().parents[2] / "leaderboards"
CONFIG_FILE = LOCAL_CONFIG  # where kernelcup run in that folder reads it (kernelcup.core.config)
ENV_FILE = Path(".env.example")
FIRST_SOLUTION = Path("leaderboards") / "vectoradd" / "solutions" / "pytorch.py"

# Every variable kernelcup reads from the environment that an operator sets: the secrets (which
# never go into the config file) and the switches that are not config keys.
ENVIRONMENT: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Secrets: from the environment only, never in config/kernelcup.yml.", (
        ("DISCORD_TOKEN", "the Discord bot's token; set, `kernelcup serve` starts Discord (kernelcup[discord])"),
        ("SLACK_BOT_TOKEN", "the Slack bot token (xoxb-...); Slack starts with it and one of the next two"),
        ("SLACK_APP_TOKEN", "Slack app-level token (xapp-...): Socket Mode, no public URL needed"),
        ("SLACK_SIGNING_SECRET", "Slack signing secret: HTTP mode, behind your public URL"),
        ("MODAL_TOKEN_ID", "Modal credentials' id, for GPUs whose runner is modal (kernelcup[modal])"),
        ("MODAL_TOKEN_SECRET", "Modal credentials' secret"),
        ("GITHUB_TOKEN", "a token with Actions read/write on runners.github.repo (kernelcup[github])"),
        ("GITHUB_WEBHOOK_SECRET", "the GitHub webhook's secret: pull requests and comments submit (kernelcup[github])"),
        ("GITHUB_BOT_TOKEN", "the token the GitHub adapter posts check runs and comments with"),
        ("KERNELCUP_TOKEN", "your API token for `kernelcup --server URL ...` (from /leaderboard token)"),
    )),
    ("Settings: any key of config/kernelcup.yml also works as KERNELCUP_<KEY> or KERNELCUP_<SECTION>__<KEY>.", (
        ("KERNELCUP_CONFIG", "a config file to read instead of config/kernelcup.yml"),
        ("KERNELCUP_DATABASE_URL", "sqlite:///var/kernelcup.db by default, or postgresql+psycopg://user:password@host/db"),
        ("KERNELCUP_LEADERBOARDS_DIR", "the leaderboards folder (default: leaderboards)"),
        ("KERNELCUP_SERVER", "a kernelcup server's URL: the CLI's commands go to its HTTP API"),
        ("KERNELCUP_USER", "the name terminal commands act as, console:<name> (default: your login name)"),
        ("KERNELCUP_DEBUG", "1: show the stack of an unexpected error"),
    )),
    ("The local runner's harness (README: Modes).", (
        ("KERNELCUP_CACHE_DIR", "where builds (load_inline, Triton, torch.compile) are kept between runs"),
        ("KERNELCUP_HARNESS_CPUS", "off, or N: the cores the timed calls run on"),
        ("KERNELCUP_HARNESS_BYTECODE", "off, on or auto: the harness's own bytecode for torch"),
        ("KERNELCUP_HARNESS_PROFILE", "1: run a job's processes under cProfile"),
        ("KERNELCUP_HARNESS_TRACE", "a file: every benchmark case's timed calls, one JSON line a case"),
        ("KERNELCUP_HARNESS_RECORD", "cupti (default) or torch-profiler: what reads the GPU's record of a call"),
        ("KERNELCUP_HARNESS_CUPTI_LIB", "a libcupti to load instead of the one torch loaded"),
        ("KERNELCUP_HARNESS_PRESTART", "0 or 1: start ranked rounds' processes beside the first (default: 8+ cores)"),
        ("KERNELCUP_HARNESS_SANDBOX", "empty: the sandbox; own-uid; off: none (only for your own code)"),
        ("KERNELCUP_HARNESS_USER", "a user to run jobs as, instead of a uid of their own"),
        ("KERNELCUP_SANDBOX_UID_RANGE", "the uids jobs take, e.g. 2000000000-2000065535"),
    )),
)


def env_example() -> str:
    lines = [
        "# What kernelcup reads from the environment. kernelcup never reads this file: copy it to .env,",
        "# fill in what you use, and load it (set -a; . ./.env; set +a, or a service's EnvironmentFile=).",
        "# Unset or empty: the default.",
    ]
    for title, variables in ENVIRONMENT:
        lines += ["", f"# {title}"]
        for name, comment in variables:
            lines += [f"# {comment}", f"{name}="]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class StarterFile:
    path: Path  # relative to the folder written
    content: bytes


def starter_files() -> Iterator[StarterFile]:
    if not SHIPPED_LEADERBOARDS.is_dir():
        raise UserError(f"This kernelcup has no shipped leaderboards ({SHIPPED_LEADERBOARDS} is missing).",
                        "Reinstall it: pip install --force-reinstall kernelcup.")
    for path in sorted(SHIPPED_LEADERBOARDS.rglob("*")):
        relative = path.relative_to(SHIPPED_LEADERBOARDS)
        if path.is_file() and not any(part.startswith((".", "__")) for part in relative.parts):
            yield StarterFile(Path("leaderboards") / relative, path.read_bytes())
    yield StarterFile(CONFIG_FILE, DEFAULT_CONFIG.read_bytes())
    yield StarterFile(ENV_FILE, env_example().encode())


def write_starter(folder: Path, *, force: bool) -> list[Path]:
    """Write the starter set into ``folder`` (made if missing); the files written. Refuses, writing
    nothing, where a file it would write exists and ``force`` is off."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder} is a file, not a folder.", "Name a new folder, e.g. kernelcup init my-cup.")
    files = list(starter_files())
    if not force:
        there = [f.path for f in files if (folder / f.path).exists() or (folder / f.path).is_symlink()]
        if there:
            more = f" and {len(there) - 1} more" if len(there) > 1 else ""
            raise UserError(f"{folder / there[0]}{more} already exist{'s' if len(there) == 1 else ''}: "
                            "nothing was written.", "kernelcup init --force replaces them (your other files stay).")
    for file in files:
        target = folder / file.path
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()  # replaced, never written through
        target.write_bytes(file.content)
    return [file.path for file in files]


def next_steps(folder: Path) -> list[str]:
    """The commands to run next, as a person types them."""
    here = folder.resolve() == Path.cwd().resolve()
    return [
        *([] if here else [f"cd {shlex.quote(str(folder))}"]),
        "kernelcup list",
        f"kernelcup submit test {FIRST_SOLUTION}",
    ]
