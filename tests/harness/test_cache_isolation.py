"""Nothing one job writes in a cache reaches another user's or another leaderboard's job (issue #37).

Every job here runs as the bot runs it, through the local runner: the harness in a sandbox of its
own (a leaderboard's ``reference.py`` runs there: a creator's code), the submission in one inside
it. Hostile creators and submissions try to read what another job built, plant files in every
build cache they reach and rewrite the bytecode every harness reads (``KERNELCUP_HARNESS_BYTECODE
=on`` stands for a GPU image whose torch has none of its own); the jobs of other users and other
leaderboards must see none of it, and a ranked job's secret seed and result key must not leak.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernelcup.core.pipeline.runner import RunContext
from kernelcup.harness.process import BYTECODE_ENV, CACHE_ENV, child_identity
from kernelcup.harness.spec import JobSpec, Mode, Progress, Result, Status
from kernelcup.runners.local import LocalRunner
from tests.harness.conftest import LEADERBOARDS, leaderboard_spec, submission

ADDMUL = LEADERBOARDS / "addmul"
KERNEL = '''
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, out = data
    out.copy_(a * 2 + b)
    return out
'''

pytestmark = pytest.mark.skipif(not child_identity().sandbox, reason="no sandbox on this machine")


def job(board: str, user: str, source: str, *, reference: str = "", mode: Mode = Mode.TEST,
        secret_seed: int | None = None, timeout_s: float | None = None) -> JobSpec:
    """A job of ``user`` on leaderboard ``board`` (the addmul task), with code added to its reference."""
    spec = leaderboard_spec(ADDMUL, source, mode, secret_seed=secret_seed, timeout_s=timeout_s)
    spec.leaderboard, spec.user = board, user
    spec.files["reference.py"] += reference
    return spec


async def run(spec: JobSpec) -> Result:
    """One job through a local runner of its own, as the bot runs it."""
    async def progress(event: Progress) -> None:
        return None

    return await LocalRunner(gpu="cpu").run(spec, RunContext(1, "cpu", spec.timeout_s + 120), progress)


def scope(board: str, user: str, source: str) -> str:
    """The name of the folder of the builds of ``user``'s ``source`` on ``board`` (workspace.cache_scope)."""
    return hashlib.sha256("\0".join((board, user, source)).encode()).hexdigest()[:32]


def files_holding(folder: Path, text: str) -> list[Path]:
    found = []
    for path in folder.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and text.encode() in path.read_bytes():
                found.append(path)
        except OSError:
            continue
    return found


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The runner's cache folder (every job's builds)."""
    folder = tmp_path / "store"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


@pytest.fixture(scope="module")
def bytecode_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once for this module's jobs: a build compiles all of torch (a minute on a small box)."""
    return tmp_path_factory.mktemp("bytecode")


@pytest.fixture
def bytecode_on(bytecode_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(BYTECODE_ENV, "on")
    monkeypatch.setenv("KERNELCUP_HARNESS_BYTECODE_DIR", str(bytecode_home))
    yield bytecode_home


@pytest.mark.timeout(1200)  # a load_inline build: a minute on an idle 2-core box, several under load
async def test_the_same_users_next_job_on_the_same_leaderboard_compiles_nothing(store: Path) -> None:
    source = submission("inline_extension.py")
    first = await run(job("board-a", "discord:alice", source, timeout_s=600))
    assert first.status is Status.PASSED, first.verdict
    assert "c++ " in first.stdout, first.stdout[-2000:]
    again = await run(job("board-a", "discord:alice", source, timeout_s=120))
    assert again.status is Status.PASSED, again.verdict
    assert "ninja: no work to do" in again.stdout and "c++ " not in again.stdout, again.stdout[-2000:]


# --- 1. reading another job's build ---------------------------------------------------------

# Keeps its private source where torch's load_inline does (TORCH_EXTENSIONS_DIR/<name>/main.cpp, beside
# build.ninja and the built library), without the minute of compiling (test_build_cache.py builds one).
PRIVATE_BUILD = '''
import os

from task import input_t, output_t

_folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kc_private")
os.makedirs(_folder, exist_ok=True)
with open(os.path.join(_folder, "main.cpp"), "w") as _source:
    _source.write("int twice(int x) { return 2 * x; }  // @MARKER@")
''' + KERNEL

SEARCH = '''
import os as _kc_os


def _kc_search(marker, roots):
    found = []
    for root in roots:
        for folder, _, names in _kc_os.walk(root):
            for name in names:
                path = _kc_os.path.join(folder, name)
                try:
                    with open(path, "rb") as handle:
                        if marker in handle.read(1 << 22):
                            found.append(path)
                except OSError:
                    pass
    return found


_kc_roots = [_kc_os.environ.get(name) for name in ("KERNELCUP_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR",
                                                    "TORCHINDUCTOR_CACHE_DIR")]
_kc_roots += ["@STORE@", "/kernelcup-cache", _kc_os.path.expanduser("~/.cache")]
# Spelled backwards here, so that this file (in the job's own folders) does not hold it.
_KC_FOUND = _kc_search("@REKRAM@"[::-1].encode(), [root for root in _kc_roots if root])
if _KC_FOUND:
    raise RuntimeError(f"another user's build was in reach: {_KC_FOUND}")
'''


async def test_no_job_of_another_user_or_leaderboard_can_read_what_a_job_built(store: Path) -> None:
    marker = f"alice-private-{secrets.token_hex(6)}"
    built = await run(job("public-board", "discord:alice", PRIVATE_BUILD.replace("@MARKER@", marker)))
    assert built.status is Status.PASSED, built.verdict
    assert files_holding(store, marker), "alice's build was not kept for her next job"
    search = SEARCH.replace("@REKRAM@", marker[::-1]).replace("@STORE@", str(store))
    # A hidden leaderboard's reference (in the harness) and its creator's own submission look for it.
    hunted = await run(job("hidden-board", "discord:mallory", search + KERNEL, reference=search))
    assert hunted.status is Status.PASSED, hunted.verdict


# --- 2. planting files in another job's build -------------------------------------------------

LISTER = '''
import os

from task import input_t, output_t

_SEEN = []
for _variable in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR"):
    for _folder, _, _names in os.walk(os.environ[_variable]):
        _SEEN += [os.path.join(_folder, _name) for _name in _names]
    with open(os.path.join(os.environ[_variable], "own-build"), "w") as _built:
        _built.write("@TAG@")
print("cache-listing", sorted(_SEEN))
''' + KERNEL

PLANTER = '''
import os as _kc_os


def _kc_plant(roots, name, content, depth=3):
    planted = []
    for root in roots:
        for folder, dirs, _ in _kc_os.walk(root):
            if folder[len(root):].count(_kc_os.sep) >= depth:
                dirs[:] = []
            try:
                with open(_kc_os.path.join(folder, name), "w") as handle:
                    handle.write(content)
                planted.append(folder)
            except OSError:
                pass
    return planted


_kc_roots = [_kc_os.environ.get(name) for name in ("KERNELCUP_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR",
                                                    "TORCHINDUCTOR_CACHE_DIR")]
_kc_roots = [root for root in [*_kc_roots, "@STORE@", "/kernelcup-cache"] if root and _kc_os.path.isdir(root)]
_KC_CONTENT = @CONTENT@
_kc_plant(_kc_roots, "@PLANTED@", _KC_CONTENT)
for _kc_kind in ("torch_extensions", "triton", "torchinductor"):  # where the victim's scope would be
    _kc_target = _kc_os.path.join(_kc_os.environ.get("KERNELCUP_CACHE_DIR", "/nowhere"), _kc_kind, "@VICTIM@")
    try:
        _kc_os.makedirs(_kc_target, exist_ok=True)
        _kc_plant([_kc_target], "@PLANTED@", _KC_CONTENT)
    except OSError:
        pass
'''


def planter(store: Path, name: str, content: str, victim: str) -> str:
    """A creator's code that writes ``name`` (``content``) in every folder of every build cache it
    reaches, and in the folder where ``victim``'s builds would be."""
    return (PLANTER.replace("@STORE@", str(store)).replace("@PLANTED@", name).replace("@CONTENT@", repr(content))
            .replace("@VICTIM@", victim))


def listing(result: Result) -> str:
    return next(line for line in result.stdout.splitlines() if line.startswith("cache-listing"))


async def test_a_file_one_job_plants_in_its_caches_never_appears_in_another_users_or_leaderboards_build(
    store: Path,
) -> None:
    tag = secrets.token_hex(6)
    # The same source by two users on two leaderboards: the second finds nothing the first built.
    same = LISTER.replace("@TAG@", tag)
    first = await run(job("board-x", "discord:alice", same))
    assert first.status is Status.PASSED, first.verdict
    second = await run(job("board-y", "discord:bob", same))
    assert second.status is Status.PASSED, second.verdict
    assert "own-build" not in listing(second), listing(second)
    # A creator plants a file in every cache folder their leaderboard's code reaches, and where a
    # known victim's builds would be; the victim's next job on another leaderboard finds none of it.
    victim = LISTER.replace("@TAG@", "carol")
    before = await run(job("board-z", "discord:carol", victim))
    assert before.status is Status.PASSED, before.verdict
    planted = f"planted-{tag}"
    where = scope("board-z", "discord:carol", victim)
    hostile = planter(store, planted, "planted by another leaderboard's creator", where)
    await run(job("board-x", "discord:mallory", hostile + KERNEL, reference=hostile))
    after = await run(job("board-z", "discord:carol", victim))
    assert after.status is Status.PASSED, after.verdict
    assert "own-build" in listing(after), "carol's own builds were not kept for her next job"
    assert planted not in listing(after), listing(after)


# --- 3. and 4. rewriting bytecode; everything at once against a ranked job ---------------------

# Runs wherever it is imported: says so in the job's output and its caches, and sends the spec's
# secrets (the seed, the result key) wherever it can, the signed result included.
PLANT = '''
import json as _kc_json, os as _kc_os, sys as _kc_sys

_KC_MARK = "@MARK@"
_KC_LEAKED = []


def _kc_drop(what):
    line = f"{_KC_MARK} pid={_kc_os.getpid()} {what}"
    _KC_LEAKED.append(line)
    print(line, flush=True)
    for name in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "KERNELCUP_CACHE_DIR"):
        root = _kc_os.environ.get(name)
        for folder, dirs, _ in _kc_os.walk(root or "/nowhere"):
            if folder[len(root):].count(_kc_os.sep) >= 2:
                dirs[:] = []
            try:
                with open(_kc_os.path.join(folder, _KC_MARK), "a") as handle:
                    handle.write(line + "\\n")
            except OSError:
                pass


_kc_loads, _kc_dumps = _kc_json.loads, _kc_json.dumps


def _kc_spy(text, *args, **kwargs):
    value = _kc_loads(text, *args, **kwargs)
    if isinstance(value, dict) and "result_key" in value:
        _kc_drop(f"seed={value.get('secret_seed')} key={value.get('result_key')}")
    return value


def _kc_inject(value, *args, **kwargs):
    if isinstance(value, dict) and "verdict" in value and "stdout" in value:
        value = {**value, "stdout": str(value["stdout"]) + " ".join(_KC_LEAKED)}
    return _kc_dumps(value, *args, **kwargs)


_kc_json.loads, _kc_json.dumps = _kc_spy, _kc_inject
_kc_drop("ran in " + " ".join(_kc_sys.argv[:2]))
'''

REWRITE = '''
import importlib.util as _kc_util, marshal as _kc_marshal, os as _kc_os, sys as _kc_sys
from importlib._bootstrap_external import _code_to_timestamp_pyc


def _kc_rewrite(module, plant):
    """Put ``plant`` in front of ``module``'s code in the bytecode this process reads."""
    if not _kc_sys.pycache_prefix:
        return "no bytecode folder"
    origin = _kc_util.find_spec(module).origin
    cached = _kc_util.cache_from_source(origin)
    with open(origin) as handle:
        code = compile(plant + "\\n" + handle.read(), origin, "exec")
    info = _kc_os.stat(origin)
    try:
        _kc_os.makedirs(_kc_os.path.dirname(cached), exist_ok=True)
        with open(cached, "wb") as handle:
            handle.write(_code_to_timestamp_pyc(code, info.st_mtime, info.st_size))
        return "rewrote " + cached
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


_KC_REWRITTEN = [_kc_rewrite(name, @PLANT@) for name in ("torch.version", "torch.types")]
print("bytecode-rewrite", _KC_REWRITTEN)
'''


def rewriter(plant: str) -> str:
    return REWRITE.replace("@PLANT@", repr(plant))


BYTECODE_PROBE = '''
import os, sys, torch.version
print("bytecode-probe", os.environ.get("PYTHONPYCACHEPREFIX", ""), sys.dont_write_bytecode,
      torch.version.__spec__.cached)
''' + KERNEL

HARNESS_BYTECODE_PROBE = '''
import sys as _kc_sys, torch.version as _kc_version
if not (_kc_sys.pycache_prefix and _kc_version.__spec__.cached.startswith(_kc_sys.pycache_prefix)):
    raise RuntimeError(f"the harness reads no kept bytecode: {_kc_sys.pycache_prefix!r}")
'''
HARNESS_WRITES_NONE = '''
if not _kc_sys.dont_write_bytecode:
    raise RuntimeError(f"the harness writes bytecode in {_kc_sys.pycache_prefix}")
'''


def built(home: Path) -> Path:
    folders = [folder for folder in home.iterdir() if folder.is_dir() and not folder.name.startswith(".")]
    assert len(folders) == 1, folders
    return folders[0]


def bytecode_intact(home: Path) -> bool:
    from kernelcup.harness import bytecode

    return bytecode.verify(built(home))


async def test_bytecode_is_built_outside_every_job_and_the_harness_and_the_submission_only_read_it(
    store: Path, bytecode_on: Path
) -> None:
    probe = HARNESS_BYTECODE_PROBE + HARNESS_WRITES_NONE
    result = await run(job("board-x", "discord:alice", BYTECODE_PROBE, reference=probe))
    assert result.status is Status.PASSED, result.verdict
    line = next(line for line in result.stdout.splitlines() if line.startswith("bytecode-probe"))
    prefix, dont_write, cached = line.split()[1:4]
    folder = built(bytecode_on)
    # The submission's process reads it (torch's modules from it) and writes none.
    assert (prefix, dont_write) == (str(folder), "True") and cached.startswith(str(folder)), line
    assert any(folder.rglob("torch/__init__.*.pyc")) and any(folder.rglob("torch/_inductor/scheduler.*.pyc"))
    assert bytecode_intact(bytecode_on)  # the job's own files (the leaderboard's) left nothing either
    assert not (store / "bytecode").exists()


async def test_a_pyc_a_job_rewrites_is_never_loaded_by_a_later_jobs_harness_or_submission(
    store: Path, bytecode_on: Path
) -> None:
    mark = f"kc-planted-{secrets.token_hex(6)}"
    hostile = rewriter(PLANT.replace("@MARK@", mark))
    attempt = await run(job("board-x", "discord:mallory", hostile + KERNEL, reference=hostile))
    assert "bytecode-rewrite" in attempt.stdout, attempt.stdout[-2000:]  # the submission's try
    later = await run(job("board-y", "discord:bob", BYTECODE_PROBE, reference=HARNESS_BYTECODE_PROBE))
    assert mark not in later.to_json(), later.stdout[-2000:]
    assert not list(store.rglob(mark))
    assert later.status is Status.PASSED, later.verdict  # its harness did read the kept bytecode
    assert bytecode_intact(bytecode_on)


CACHED_BUILD = '''
import os, sys

from task import input_t, output_t

# Like a kept load_inline or Triton build: what an earlier job left in the cache is loaded as it is.
_folder = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "cached_ext")
if os.path.exists(os.path.join(_folder, "cached_ext.py")):
    sys.path.insert(0, _folder)
    import cached_ext  # noqa: F401
else:
    os.makedirs(_folder, exist_ok=True)
    with open(os.path.join(_folder, "cached_ext.py"), "w") as _built:
        _built.write("BUILT = True\\n")
''' + KERNEL


async def test_a_hostile_creator_plants_everywhere_and_another_users_ranked_job_leaks_nothing(
    store: Path, bytecode_on: Path
) -> None:
    mark = f"kc-planted-{secrets.token_hex(6)}"
    plant = PLANT.replace("@MARK@", mark)
    seed = 7_301_946_285_519
    warm = await run(job("board-y", "discord:bob", CACHED_BUILD))  # bob's builds, kept for his next job
    assert warm.status is Status.PASSED, warm.verdict
    # Board X's creator: their reference rewrites the bytecode every harness reads and plants
    # code as a kept build in every folder of every build cache it reaches (a kept build's own
    # folder among them), and where bob's would be.
    victim = os.path.join(scope("board-y", "discord:bob", CACHED_BUILD), "cached_ext")
    hostile = rewriter(plant) + planter(store, "cached_ext.py", plant, victim)
    await run(job("board-x", "discord:creator-x", hostile + KERNEL, reference=hostile))
    spec = job("board-y", "discord:bob", CACHED_BUILD, mode=Mode.RANKED, secret_seed=seed)
    ranked = await run(spec)
    assert ranked.status is Status.PASSED, ranked.verdict
    output = ranked.to_json()
    assert mark not in output, ranked.stdout[-3000:]
    assert str(seed) not in output and spec.result_key not in output
    assert not list(store.rglob(mark)), "the planted code ran in one of board Y's processes"
    assert not files_holding(store, str(seed)) and not files_holding(store, spec.result_key)
    assert bytecode_intact(bytecode_on)


def test_a_bytecode_folder_changed_after_its_check_is_found_out(tmp_path: Path) -> None:
    from kernelcup.harness import bytecode
    from kernelcup.harness.process import BYTECODE_MANIFEST

    folder = tmp_path / "cp311-built"
    (folder / "torch").mkdir(parents=True)
    kept = folder / "torch" / "version.cpython-311.pyc"
    kept.write_bytes(b"built outside every job")
    (folder / BYTECODE_MANIFEST).write_text(json.dumps(bytecode._digests(folder)))
    assert bytecode.intact(folder) and bytecode.intact(folder)  # the second from its stamp
    times = kept.stat()
    kept.write_bytes(b"planted by another job!")  # as long, and its times put back
    os.utime(kept, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert not bytecode.intact(folder)
    kept.write_bytes(b"built outside every job")
    assert bytecode.intact(folder)
    (folder / "torch" / "types.cpython-311.pyc").write_bytes(b"one more")
    assert not bytecode.intact(folder)
