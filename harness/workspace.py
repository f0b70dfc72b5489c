"""The directories of one run and the job's build caches.

``harness/``: the leaderboard's files as the harness imports them (0700, never the
submission's). ``work/``: every file, the submission included; the child's cwd, writable by it.
``home/``: the child's HOME and TMPDIR. ``root/``: the sandbox's mount point.

Caches for ``load_inline``, Triton, ``torch.compile`` and nvcc builds live under
``$KERNELCUP_CACHE_DIR`` (default ``~/.cache/kernelcup``) in ``<kind>/<scope>/``, one scope per
leaderboard, user and submission source (:func:`cache_scope`). Whatever a job writes there — the
submission, or the leaderboard's own code in the harness — only a later job of the same
leaderboard, user and source reads: code that was in every such job anyway. The local runner
gives each harness a copy of its job's scope alone (:func:`stage_caches`, :func:`keep_caches`),
so no job sees another's. A sandboxed job never sees that folder either: its cache is copied
into the job's ``cache/`` before the job, which the job sees at one fixed path
(:data:`SANDBOX_CACHE`), and what the job built or changed is copied back after it. The fixed
path and the files' times, kept both ways, are what let a ``load_inline`` build (ninja files that
name their sources by absolute path, outputs judged by time) be found up to date by the next job
instead of built again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kernelcup.harness.process import CACHE_ENV as CACHE_ENV
from kernelcup.harness.process import Identity, Sandbox, cache_root
from kernelcup.harness.spec import JobSpec

CACHE_COPY_LIMIT = 2 << 30  # bytes of one kind of a job's build cache copied after a job
# The most the build caches a runner keeps may take, all jobs together (MiB). A job's caches larger
# than this are not kept; past it, the least recently used are removed first.
CACHE_MAX_ENV = "KERNELCUP_CACHE_MAX_MB"
CACHE_MAX_DEFAULT_MB = 10 << 10
KINDS = ("torch_extensions", "triton", "torchinductor", "nvcc")  # the build caches, one folder each
SANDBOX_CACHE = "/kernelcup-cache"  # where a sandboxed job sees its build caches
# torch's FileBaton: a build killed by a time limit leaves it behind, and every later load of that
# extension would wait on it forever; never carried from one job to the next.
_NOT_CARRIED = frozenset({"lock"})


class WorkspaceError(Exception):
    """The spec's files cannot be laid out (a bad file name): a harness ERROR."""


def cache_scope(source: str, leaderboard: str = "", user: str = "") -> str:
    """The folder name of the builds that jobs of one leaderboard, user and source share."""
    key = "\0".join((leaderboard, user, source))
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def cache_dir(kind: str, source: str, leaderboard: str = "", user: str = "") -> Path:
    """The build cache for ``kind`` of the jobs of ``source`` by ``user`` on ``leaderboard``."""
    return cache_root() / kind / cache_scope(source, leaderboard, user)


def job_cache_dir(spec: JobSpec, kind: str, root: Path | None = None) -> Path:
    """The job's build cache for ``kind``, under ``root`` (default: the cache folder)."""
    scope = cache_scope(spec.files.get(spec.submission_name, ""), spec.leaderboard, spec.user)
    return (root or cache_root()) / kind / scope


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
    sandbox: Sandbox | None = None
    caches: list[tuple[Path, Path]] = field(default_factory=list)  # (the job's copy, the cache)
    shared: list[Path] = field(default_factory=list)  # caches the job used in place
    prepared: dict[str, Path] = field(default_factory=dict)  # kind: the path the child was given

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
        workspace.work.mkdir(mode=0o700)
        workspace.home.mkdir(mode=0o700)
        (workspace.home / "tmp").mkdir()
        workspace.give_to_child(workspace.work)
        workspace.give_to_child(workspace.home)
        if identity.sandbox:
            # The harness's folder (the job may fill it, never replace it with a link), seen
            # inside at one path for every job; bound before the job is known, as the child
            # may already be waiting in its sandbox.
            workspace.sandbox_cache.mkdir(mode=0o755)
            moved = [(workspace.sandbox_cache, SANDBOX_CACHE)]
            workspace.sandbox = Sandbox.create(identity, base, [workspace.work, workspace.home], moved)
        return workspace

    @property
    def sandbox_cache(self) -> Path:
        return self.base / "cache"

    def isolation(self) -> str:
        return self.sandbox.describe() if self.sandbox is not None else self.identity.description

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

    def build_cache(self, kind: str, spec: JobSpec) -> Path:
        """A build-cache directory for this job (``kind``: torch_extensions, triton).

        Prepared once per job: a later process of the job (a fresh one for another round) is
        given the same folder, never a second copy over what the job has already written."""
        if kind in self.prepared:
            return self.prepared[kind]
        self.prepared[kind] = self._build_cache(kind, job_cache_dir(spec, kind))
        return self.prepared[kind]

    def _build_cache(self, kind: str, path: Path) -> Path:
        if self.sandbox is not None:
            local = self.sandbox_cache / kind
            local.mkdir(exist_ok=True)
            if path.is_dir():
                _copy_tree(path, local, CACHE_COPY_LIMIT)
            self.give_to_child(local)
            self.caches.append((local, path))
            return Path(SANDBOX_CACHE) / kind
        try:
            path.mkdir(parents=True, exist_ok=True)
            if not _reachable_by(path, self.identity.uid):
                raise PermissionError(str(path))
            self.give_to_child(path)
            self.shared.append(path)
            return path
        except OSError:
            local = self.home / "cache" / kind
            local.mkdir(parents=True, exist_ok=True)
            self.give_to_child(local)
            return local

    def cleanup(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
        for local, shared in self.caches:
            try:
                shared.mkdir(parents=True, exist_ok=True)
                _copy_tree(local, shared, CACHE_COPY_LIMIT)
            except OSError:
                pass  # a cache is an optimisation: a job never fails for it
        for path in self.shared:  # the job's processes are gone: a lock left now is stale
            for name in _NOT_CARRIED:
                for left in path.glob(f"*/{name}"):
                    left.unlink(missing_ok=True)
        shutil.rmtree(self.base, ignore_errors=True)


def _copy_tree(source: Path, target: Path, limit: int) -> int:
    """Copy the regular files under ``source`` that ``target`` lacks or holds in another
    version (size or time), with their times; never follow a link.

    The job wrote ``source`` (its own cache): links and special files are skipped, so it can
    make the harness copy nothing but its own files, and no more than ``limit`` bytes; a file
    whose folder in ``target`` leads elsewhere through a link is not written.
    """
    copied = 0
    try:
        if not stat.S_ISDIR(source.lstat().st_mode):  # the job replaced its folder with a link
            return 0
    except OSError:
        return 0
    inside = os.path.realpath(target)
    for folder, dirs, files in os.walk(source, followlinks=False):
        relative = Path(folder).relative_to(source)
        leads_out: bool | None = None  # whether this folder's place in ``target`` is elsewhere: once per folder
        for name in files:
            if name in _NOT_CARRIED or name.endswith(".kc-partial"):
                continue
            origin = Path(folder) / name
            destination = target / relative / name
            try:
                info = origin.lstat()
                if not stat.S_ISREG(info.st_mode) or copied + info.st_size > limit or _same_file(info, destination):
                    continue
                if leads_out is None:
                    leads_out = os.path.commonpath([inside, os.path.realpath(destination.parent)]) != inside
                if leads_out:
                    continue
                destination.parent.mkdir(parents=True, exist_ok=True)
                partial = destination.with_name(destination.name + ".kc-partial")
                shutil.copyfile(origin, partial, follow_symlinks=False)
                os.utime(partial, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)
                partial.replace(destination)
                copied += info.st_size
            except OSError:
                continue
        dirs[:] = [d for d in dirs if not (Path(folder) / d).is_symlink()]
    return copied


def _same_file(info: os.stat_result, destination: Path) -> bool:
    try:
        there = destination.lstat()
    except FileNotFoundError:
        return False
    return there.st_size == info.st_size and there.st_mtime_ns == info.st_mtime_ns


def build_cache_env(spec: JobSpec, workspace: Workspace) -> dict[str, str]:
    """Where the submission's builds (``load_inline``, Triton) are kept, as environment variables."""
    return {
        "TORCH_EXTENSIONS_DIR": str(workspace.build_cache("torch_extensions", spec)),
        "TRITON_CACHE_DIR": str(workspace.build_cache("triton", spec)),
        # torch.compile's own cache (else under the job's /tmp, gone with it): a rerun of the same
        # source from the terminal finds its compiled graphs instead of compiling again.
        "TORCHINDUCTOR_CACHE_DIR": str(workspace.build_cache("torchinductor", spec)),
        # Triton's autotuner keeps its choice in that cache: a submission re-run on this
        # machine (a repeat, the final standings) runs the configuration it chose before.
        "TRITON_CACHE_AUTOTUNING": "1",
    }


def cache_cap() -> int:
    """``KERNELCUP_CACHE_MAX_MB`` in bytes (default 10 GiB): what a runner's kept caches may take."""
    try:
        return max(0, int(os.environ.get(CACHE_MAX_ENV, "") or CACHE_MAX_DEFAULT_MB)) << 20
    except ValueError:
        return CACHE_MAX_DEFAULT_MB << 20


def stage_caches(spec: JobSpec, store: Path, staged: Path) -> None:
    """For a runner: copy the job's build caches from the cache folder ``store`` into ``staged``
    (the folder its harness takes for its cache folder), owned as ``staged`` is (by the harness's
    user). The harness sees no other job's builds, and writes nowhere another job reads."""
    for kind in KINDS:
        source, target = job_cache_dir(spec, kind, store), job_cache_dir(spec, kind, staged)
        target.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            _copy_tree(source, target, CACHE_COPY_LIMIT)
            _touch(source)  # used now: the last to be removed past the cap
    owner = staged.stat()
    if os.geteuid() == 0 and (owner.st_uid, owner.st_gid) != (0, 0):
        for folder, dirs, files in os.walk(staged):
            for name in [folder, *(os.path.join(folder, entry) for entry in dirs + files)]:
                os.lchown(name, owner.st_uid, owner.st_gid)


def keep_caches(spec: JobSpec, staged: Path, store: Path, cap: int | None = None) -> None:
    """For a runner, once the job's harness has ended: keep what the job built or changed in its
    build caches in the cache folder ``store``. The job wrote ``staged``: its links and special
    files are not copied (:func:`_copy_tree`). ``cap`` (default :func:`cache_cap`): caches of a
    job larger than it are not kept, and past it in all the least recently used are removed."""
    cap = cache_cap() if cap is None else cap
    if sum(_tree_size(job_cache_dir(spec, kind, staged)) for kind in KINDS) > cap:
        return
    for kind in KINDS:
        try:
            kept = job_cache_dir(spec, kind, store)
            _copy_tree(job_cache_dir(spec, kind, staged), kept, CACHE_COPY_LIMIT)
            _touch(kept)
        except OSError:
            continue  # a cache is an optimisation: a job never fails for it
    trim_caches(store, cap)


def trim_caches(store: Path, cap: int) -> None:
    """Remove the least recently used scopes (one kind's builds of one leaderboard, user and
    source) of the cache folder ``store`` until what is left takes at most ``cap`` bytes."""
    scopes = []
    for kind in KINDS:
        try:
            folders = [entry for entry in (store / kind).iterdir() if entry.is_dir() and not entry.is_symlink()]
        except OSError:
            continue
        for folder in folders:
            with contextlib.suppress(OSError):
                scopes.append((folder.stat().st_mtime_ns, _tree_size(folder), folder))
    total = sum(size for _, size, _ in scopes)
    for _, size, folder in sorted(scopes, key=lambda scope: scope[0]):
        if total <= cap:
            break
        shutil.rmtree(folder, ignore_errors=True)
        total -= size


def _tree_size(folder: Path) -> int:
    """The bytes of the regular files under ``folder``, links not followed."""
    size = 0
    for root, _, files in os.walk(folder, followlinks=False):
        for name in files:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(root, name))
                size += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return size


def _touch(folder: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(folder)
