"""Problems from elsewhere, for ``admin sync --from``: a git URL, a local git repository or a folder.

A repository is cloned (``git clone --depth 1``) into ``<leaderboards_dir>/.sources/<name>``, a
hidden folder, so the plain ``sync`` of ``leaderboards_dir`` never reads it
(kernelcup.core.leaderboards.problem_sets skips hidden folders). A second sync of the same
source clones afresh into the same folder, so its leaderboards keep their source folder and are
updated, not duplicated. A folder that is no git repository is read where it is.

GPU MODE's reference-kernels keeps its problems in ``problems/<set>/<problem>/``: a source with a
``problems/`` folder is read from there, where its problem-set files (``<set>.yaml``) name each
problem's leaderboard, as GPU MODE does. Folders are looked for up to ``LEVELS`` folders down.

Only the bot's own terminal names a folder, a local repository or a ``file://`` URL: from a chat
or the API a source is a remote git URL, and no path of the bot's machine is ever looked at.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelcup.core.errors import UserError

SOURCES_DIR = ".sources"  # under leaderboards_dir; hidden, so the plain sync skips it
LEVELS = 4  # task.yml files are looked for this many folders down (GPU MODE's: 2 below problems/)
CLONE_TIMEOUT_S = 300.0
REMOTE = re.compile(r"^(?:(?:https?|ssh|git)://|[\w.-]+@[\w.-]+:)")  # scp-like: git@github.com:org/repo
# Transports git may use for the clone: no ext:: (runs a command) and no fd::.
ALLOWED_PROTOCOLS = "https:http:ssh:git:file"
HINT = ("Give a git URL (https://github.com/gpu-mode/reference-kernels, git@host:org/repo.git) or, on the "
        "bot's own terminal, a folder or a local git repository.")


@dataclass(frozen=True)
class Source:
    shown: str  # the source as the reply names it (no password of a URL)
    root: Path  # the folder whose leaderboard folders are synced
    owner: Path  # leaderboards whose source folder lies inside it come from this source
    levels: int = LEVELS  # how many folders down task.yml files are looked for


def fetch_source(text: str, leaderboards_dir: Path, *, from_this_machine: bool) -> Source:
    """The folder to sync ``text`` from: cloned where it is a repository, else the folder itself.
    A source that cannot be had is a UserError with git's own reason."""
    text = text.strip()
    shown = without_password(text)
    if not text or text.startswith("-"):  # never an option of git's
        raise UserError(f"{shown!r} is not a git URL or a folder.", HINT)
    if REMOTE.match(text):
        return _clone(text, shown, leaderboards_dir)
    if not from_this_machine:
        raise UserError("Only the bot's own terminal syncs from a folder, a local repository or a file:// URL.",
                        "From here, give the repository's git URL (https://, ssh:// or git@host:path).")
    if text.startswith("file://"):
        return _clone(text, shown, leaderboards_dir)
    path = Path(text).expanduser()
    if not path.is_dir():
        raise UserError(f"There is no folder {shown}.", HINT)
    if _is_git_repository(path):
        return _clone(path.resolve().as_uri(), shown, leaderboards_dir)
    folder = path.resolve()
    return Source(shown, _problems_root(folder), folder)


def without_password(text: str) -> str:
    """``https://user:token@host/repo`` -> ``https://host/repo``: a reply or a log never shows it."""
    return re.sub(r"(?<=://)[^/@\s]*@", "", text)


def _is_git_repository(path: Path) -> bool:
    """A work tree's top folder or a bare repository; a folder inside someone's work tree is a folder."""
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def _problems_root(folder: Path) -> Path:
    problems = folder / "problems"  # GPU MODE's reference-kernels
    return problems if problems.is_dir() else folder


def clone_folder_name(url: str) -> str:
    """``https://github.com/gpu-mode/reference-kernels.git`` -> ``reference-kernels-<hash>``: the
    repository's name for people, a hash of the whole URL so two sources never share a folder."""
    tail = re.split(r"[/:]", without_password(url).rstrip("/"))[-1].removesuffix(".git")
    tail = re.sub(r"[^A-Za-z0-9_.-]", "_", tail).lstrip(".") or "source"
    return f"{tail[:60]}-{hashlib.sha256(url.encode()).hexdigest()[:10]}"


def _clone(url: str, shown: str, leaderboards_dir: Path) -> Source:
    sources = (leaderboards_dir / SOURCES_DIR).resolve()
    sources.mkdir(parents=True, exist_ok=True)
    target = sources / clone_folder_name(url)
    # Clone beside the target, then swap: a failed clone leaves the last good one in place.
    work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=sources))
    try:
        _git("clone", "--depth", "1", "--quiet", "--", url, str(work / "new"), shown=shown)
        try:
            if target.exists():
                target.rename(work / "old")
            (work / "new").rename(target)
        except OSError as exc:  # another sync of the same source swapped its clone in meanwhile
            raise UserError(f"Cannot put the clone of {shown} in place: {exc.strerror or exc}.",
                            "Sync again once the other sync has finished.") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Source(shown, _problems_root(target), target)


def _git(*args: str, shown: str) -> None:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
           "GIT_ASKPASS": "", "SSH_ASKPASS": ""}
    try:
        done = subprocess.run(["git", *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=CLONE_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise UserError("git is not installed on the bot's machine.", "Install git, or give a folder.") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"Cloning {shown} took longer than {CLONE_TIMEOUT_S:.0f} s.",
                        "Check the URL and the network, then sync again.") from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = without_password(lines[-1].strip()) if lines else f"git exited with {done.returncode}"
        raise UserError(f"Cannot clone {shown}: {reason}", HINT)
