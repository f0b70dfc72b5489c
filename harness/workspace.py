"""The directories of one run and the per-submission build caches.

``harness/``: the leaderboard's files as the harness imports them (0700, never the
submission's). ``work/``: every file, the submission included; the child's cwd, writable by it.
``home/``: the child's HOME and TMPDIR. Caches for ``load_inline`` and Triton builds live
under ``$KERNELCUP_CACHE_DIR`` (default ``~/.cache/kernelcup``), one directory per submission
hash, so a submission can only ever reuse or spoil its own builds.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from harness.process import Identity
from harness.spec import JobSpec

CACHE_ENV = "KERNELCUP_CACHE_DIR"


class WorkspaceError(Exception):
    """The spec's files cannot be laid out (a bad file name): a harness ERROR."""


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "kernelcup"


def cache_dir(kind: str, key: str) -> Path:
    """The shared build cache of one submission (``key``: its source) for ``kind``."""
    return cache_root() / kind / hashlib.sha256(key.encode()).hexdigest()[:32]


def _safe_name(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or not path.parts or any(part in ("", ".", "..") for part in path.parts):
        raise WorkspaceError(f"bad leaderboard file name {name!r}")
    return path


def _reachable_by(path: Path, uid: int | None) -> bool:
    if uid is None:
        return True
    try:
        for parent in path.resolve().parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
    except OSError:
        return False
    return True


@dataclass
class Workspace:
    base: Path
    harness_dir: Path
    work: Path
    home: Path
    identity: Identity

    @classmethod
    def create(cls, spec: JobSpec, identity: Identity) -> Workspace:
        workspace = cls.prepare(identity)
        workspace.fill(spec)
        return workspace

    @classmethod
    def prepare(cls, identity: Identity) -> Workspace:
        """The empty directories, before the job is known (the child can start in them)."""
        base = Path(tempfile.mkdtemp(prefix="kernelcup-"))
        base.chmod(0o711)
        workspace = cls(base, base / "harness", base / "work", base / "home", identity)
        workspace.harness_dir.mkdir(mode=0o700)
        workspace.work.mkdir()
        workspace.home.mkdir()
        (workspace.home / "tmp").mkdir()
        workspace.give_to_child(workspace.work)
        workspace.give_to_child(workspace.home)
        return workspace

    def fill(self, spec: JobSpec) -> None:
        """Lay out the job's files: all of them in ``work/``, the leaderboard's in ``harness/``."""
        for name, content in spec.files.items():
            relative = _safe_name(name)
            targets = [self.work]
            if name != spec.submission_name:
                targets.append(self.harness_dir)
            for root in targets:
                target = root / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content)
                target.chmod(0o644)
        self.give_to_child(self.work)

    def give_to_child(self, path: Path) -> None:
        """Make ``path`` (and what is under it) the child's, when it runs under another uid."""
        if self.identity.uid is None:
            return
        for root, dirs, files in os.walk(path):
            for entry in [root, *(os.path.join(root, d) for d in dirs)]:
                os.chown(entry, self.identity.uid, self.identity.gid or -1)
            for name in files:
                os.chown(os.path.join(root, name), self.identity.uid, self.identity.gid or -1)

    def build_cache(self, kind: str, key: str) -> Path:
        """A build-cache directory for this submission (``kind``: torch_extensions, triton)."""
        path = cache_dir(kind, key)
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not _reachable_by(path, self.identity.uid):
                raise PermissionError(str(path))
            self.give_to_child(path)
            return path
        except OSError:
            local = self.home / "cache" / kind
            local.mkdir(parents=True, exist_ok=True)
            self.give_to_child(local)
            return local

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
