"""Bytecode for the harness's processes, built outside every job and only ever read by jobs.

Where torch's install holds no bytecode, every process of every job would compile torch's
modules from source (``harness/process.py``, keep_bytecode). Bytecode is code: a ``.pyc`` that a
job could rewrite would run in every later job's harness and submission process, on any
leaderboard, with the harness's secrets in reach. So it is built here, in a process of its own
that runs no leaderboard's or submission's code, into a fresh folder that is renamed into place
once complete, with a manifest of every file's SHA-256 written last; a runner checks the folder
against it before it first uses it and binds it read-only into every harness's sandbox
(``runners/local.py``). A full check reads every file (seconds on a busy machine, for each
``kernelcup submit``; JOURNAL.md, Bytecode), so it is done again only where the folder's files
are no longer as a full check last found them: their sizes, times and inodes, the change time
included, which no write can leave as it was (``<folder>.checked``, beside the folder and never
bound).

    python -m kernelcup.harness.bytecode FOLDER    # build into FOLDER (empty or absent)
"""

from __future__ import annotations

import compileall
import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from kernelcup.harness.process import BYTECODE_MANIFEST, bytecode_folder, bytecode_wanted

# What every harness imports (torch's compiler packages: through GPU MODE's checks), then
# every module of the packages a job's code may import from.
IMPORTS = ("torch", "torch._inductor.config", "kernelcup.harness.session", "kernelcup.harness.child")
PACKAGES = ("torch", "triton")
BUILD_TIMEOUT_S = 1800.0

_checked: set[Path] = set()  # folders this process has checked against their manifest
_lock = threading.Lock()


def build(folder: Path) -> None:
    """Compile into ``folder`` (this process's ``sys.pycache_prefix``), then write the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    sys.pycache_prefix = str(folder)
    sys.dont_write_bytecode = False
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)  # compileall's worker processes, however started
    for name in IMPORTS:
        with contextlib.suppress(Exception):  # a package this machine lacks has nothing to build
            importlib.import_module(name)
    for name in PACKAGES:
        with contextlib.suppress(ImportError, ValueError):
            spec = importlib.util.find_spec(name)
            if spec is not None and spec.origin:
                compileall.compile_dir(Path(spec.origin).parent, quiet=2, workers=min(4, os.cpu_count() or 1))
    # Nothing is written after this: a module first imported later (an exit hook of torch's or
    # Triton's) would land in the folder after its manifest, fail every check, and have each
    # runner build the folder again on every command.
    sys.dont_write_bytecode = True
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    for root, dirs, files in os.walk(folder):
        for entry in dirs:
            os.chmod(os.path.join(root, entry), 0o755)
        for entry in files:
            os.chmod(os.path.join(root, entry), 0o644)
    manifest = json.dumps(_digests(folder), sort_keys=True)
    (folder / BYTECODE_MANIFEST).write_text(manifest)
    (folder / BYTECODE_MANIFEST).chmod(0o644)
    folder.chmod(0o755)


def _digests(folder: Path) -> dict[str, str]:
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            if path.is_symlink() or (path.name == BYTECODE_MANIFEST and path.parent == folder):
                continue
            found[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _state(folder: Path) -> str:
    """Every entry under ``folder`` with its size, times and inode: any change to one of them
    (a write, a rename, a new file) changes its ``st_ctime_ns``, which no process can set back."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        for name in sorted([*dirs, *files, "."]):
            path = os.path.join(root, name)
            info = os.lstat(path)
            fields = (path, info.st_mode, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino)
            digest.update(repr(fields).encode())
    return digest.hexdigest()


def intact(folder: Path) -> bool:
    """Whether ``folder`` is as built: unchanged since a full check (:func:`verify`) found it so,
    or a full check finds it so now."""
    stamp = folder.with_name(folder.name + ".checked")
    try:
        state = _state(folder)
        if stamp.is_file() and stamp.read_text() == state:
            return True
    except OSError:
        return False
    if not verify(folder):
        return False
    with contextlib.suppress(OSError):
        partial = stamp.with_name(stamp.name + ".partial")
        partial.write_text(state)
        partial.replace(stamp)
    return True


def verify(folder: Path) -> bool:
    """Whether ``folder`` holds exactly what its manifest lists, each file as it was built."""
    try:
        listed = json.loads((folder / BYTECODE_MANIFEST).read_text())
        links = any(Path(root, name).is_symlink() for root, dirs, files in os.walk(folder) for name in dirs + files)
        return isinstance(listed, dict) and not links and _digests(folder) == listed
    except (OSError, ValueError):
        return False


def ensure(environment: dict[str, str]) -> Path | None:
    """For a runner: the bytecode folder its harnesses read, built now where it is missing or
    differs from its manifest (in a process of its own, with ``environment``), checked once per
    process; None where none is wanted (``KERNELCUP_HARNESS_BYTECODE``) or it cannot be built."""
    if not bytecode_wanted():
        return None
    folder = bytecode_folder()
    with _lock:
        if folder in _checked:
            return folder
        if folder.exists() and not intact(folder):
            shutil.rmtree(folder, ignore_errors=True)  # half built, changed, or of another release
        if not folder.exists() and not _build_beside(folder, environment):
            return None
        if not intact(folder):
            return None
        _checked.add(folder)
        return folder


def _build_beside(folder: Path, environment: dict[str, str]) -> bool:
    """Build into a fresh folder next to ``folder`` and rename it into place (another process
    may have done the same first: then its folder is kept)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=folder.parent))
    try:
        command = [sys.executable, "-s", "-m", "kernelcup.harness.bytecode", str(building)]
        subprocess.run(command, env=environment, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=BUILD_TIMEOUT_S, check=True)
        building.rename(folder)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder.is_dir()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(argv[0])
    if folder.exists() and any(folder.iterdir()):
        print(f"{folder} is not empty", file=sys.stderr)
        return 2
    build(folder)
    sys.stdout.flush()
    os._exit(0)  # no interpreter shutdown: its exit hooks import, and the folder is complete


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
