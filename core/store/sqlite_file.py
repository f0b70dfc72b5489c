"""The SQLite database file: created private, and refused at start where other users could read it
or change it.

The file holds every secret seed, submission and token: a mode that lets another user read it
(``mode & 0o077``) leaks them all. Its folder must not let another user write (``mode & 0o022``):
they could replace the file, or plant the ``-wal`` file SQLite reads beside it (a sticky bit does
not stop them creating a name that is not there yet). SQLite creates its ``-wal``, ``-shm`` and
``-journal`` files with the database file's own mode, so a private file keeps them private, and
any left over from a looser past are checked too. There is no override: the fix is one chmod.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from kernelcup.core.errors import SetupError
from kernelcup.core.private_paths import GROUP_OR_OTHERS_ANY, GROUP_OR_OTHERS_WRITE, Exposure, exposure

COMPANIONS = ("-wal", "-shm", "-journal")


def create_private(path: Path) -> None:
    """The folder (0700) and an empty database file (0600) where they are missing; SQLite would
    create the file 0644, and an empty file is a valid empty database. Only the last folder of a
    new chain is made 0700: the ones above it are the operator's."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # O_EXCL: never through a link planted at the name. Any other failure is SQLite's to report.
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))


def exposures(path: Path) -> list[Exposure]:
    """What lets another user at the database ``path`` (its real file, links followed)."""
    real = path.resolve()
    found: list[Exposure] = []
    for folder in dict.fromkeys((path.absolute().parent, real.parent)):  # a link's folder, the file's
        problem = exposure(folder, os.stat(folder), GROUP_OR_OTHERS_WRITE)
        if problem is not None:
            found.append(problem)
    for name in (real, *(real.with_name(real.name + suffix) for suffix in COMPANIONS)):
        try:
            info = os.stat(name)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(info.st_mode):  # anything else is SQLite's to refuse, in its own words
            problem = exposure(name, info, GROUP_OR_OTHERS_ANY)
            if problem is not None:
                found.append(problem)
    return found


def refuse_exposed(path: Path) -> None:
    """Raise SetupError naming each exposed path and the command that fixes it."""
    found = exposures(path)
    if found:
        raise SetupError(
            "The database is open to other users of this machine, who could read its secret seeds,"
            " code and tokens or change it: " + "; ".join(str(e) for e in found) + ".",
            "Fix: " + "; ".join(e.fix for e in found) + " (kernelcup creates them 0600 and 0700).")
