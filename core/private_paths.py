"""Paths that must stay this user's: who owns a file or folder and what its mode lets others do.

The SQLite database holds every seed, submission and token, and the hand-off socket takes
terminal commands with their files: another local user who can read the one or bind the other
reads or sends what the bot's own user would. So both are checked before use, by what the file
system says now (``stat``), never by how they were created. Standard library only: the
terminal's hand-off imports this before (or instead of) the store.
"""

from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

GROUP_OR_OTHERS_WRITE = 0o022  # a folder others can write: they can replace or add the files in it
GROUP_OR_OTHERS_ANY = 0o077  # a secret file (or a private folder): any bit for others is too much


def trusted_owner(uid: int) -> bool:
    """This process's user, or root (who can read and change everything anyway)."""
    return uid in (os.geteuid(), 0)


@dataclass(frozen=True)
class Exposure:
    """Why a path is not private enough, and the shell command that makes it so."""

    path: Path
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.path} {self.problem}"


def exposure(path: Path, info: os.stat_result, forbidden: int, *, owner_only: bool = False) -> Exposure | None:
    """None where ``path`` (as ``info`` describes it) belongs to this user (or root, unless
    ``owner_only``) and its mode has none of the ``forbidden`` bits."""
    quoted = shlex.quote(str(path))
    owner_ok = info.st_uid == os.geteuid() if owner_only else trusted_owner(info.st_uid)
    if not owner_ok:
        return Exposure(path, f"belongs to uid {info.st_uid}, another user, who can change it",
                        f"remove it, or `chown {os.geteuid()} {quoted}` if it is yours")
    mode = stat.S_IMODE(info.st_mode)
    if mode & forbidden:
        wanted = mode & ~forbidden & 0o7777
        return Exposure(path, f"has mode {mode:04o}: {_who_may(mode & forbidden, stat.S_ISDIR(info.st_mode))}",
                        f"chmod {wanted:o} {quoted}")
    return None


def _who_may(bits: int, folder: bool) -> str:
    who = [name for name, mask in (("its group", 0o070), ("every other user", 0o007)) if bits & mask]
    verbs = [verb for verb, mask in (("read", 0o044), ("write", 0o022), ("enter" if folder else "run", 0o011))
             if bits & mask]
    what = "add, remove and replace the files in it" if folder and bits & 0o022 else " and ".join(verbs) + " it"
    return f"{' and '.join(who)} may {what}"
