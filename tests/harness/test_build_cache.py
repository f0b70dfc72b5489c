"""Build caches carried from one job to the next of the same leaderboard, user and source (harness/workspace.py).

A ``load_inline`` build is a ninja build: ``build.ninja`` names each source by absolute path and
ninja judges outputs by their times. A job's cache is a copy (the sandbox never sees the shared
folder), so the copy must keep the files' times, and the job must see it at the same path every
time; else every job of an inline-extension submission compiles again (tens of seconds, longer
with nvcc than a whole test run may take). A build killed by a time limit leaves torch's
``lock`` file, which would make every later job wait on it until its time ran out.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelcup.harness import workspace as ws
from kernelcup.harness.spec import Status
from tests.harness.conftest import LEADERBOARDS, leaderboard_spec, run_harness, submission


def test_copy_keeps_times_skips_locks_and_links_and_replaces_changed_files(tmp_path: Path) -> None:
    source, target = tmp_path / "job", tmp_path / "shared"
    (source / "ext").mkdir(parents=True)
    target.mkdir()
    built = source / "ext" / "ext.so"
    built.write_bytes(b"new build")
    os.utime(built, ns=(1_000_000_000, 1_500_000_000_123))
    (source / "ext" / "lock").write_text("")
    (source / "ext" / "link").symlink_to("/etc/passwd")
    (target / "ext").mkdir()
    (target / "ext" / "ext.so").write_bytes(b"old")
    ws._copy_tree(source, target, ws.CACHE_COPY_LIMIT)
    copied = target / "ext" / "ext.so"
    assert copied.read_bytes() == b"new build"
    assert copied.stat().st_mtime_ns == 1_500_000_000_123
    assert not (target / "ext" / "lock").exists()
    assert not (target / "ext" / "link").exists()
    assert ws._copy_tree(source, target, ws.CACHE_COPY_LIMIT) == 0  # nothing changed since


def test_a_sandboxed_job_sees_its_caches_at_one_fixed_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelcup.harness.process import child_identity

    identity = child_identity()
    if not identity.sandbox:
        pytest.skip(f"no sandbox on this machine ({identity.description})")
    monkeypatch.setenv(ws.CACHE_ENV, str(tmp_path / "cache"))
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("correct.py"))
    paths = []
    for _ in range(2):
        workspace = ws.Workspace.create(spec, identity)
        try:
            paths.append(ws.build_cache_env(spec, workspace)["TORCH_EXTENSIONS_DIR"])
            assert workspace.sandbox is not None
            assert workspace.sandbox.moved == [(workspace.sandbox_cache, ws.SANDBOX_CACHE)]
        finally:
            workspace.cleanup()
    assert paths[0] == paths[1] == f"{ws.SANDBOX_CACHE}/torch_extensions"


def test_an_inline_extension_is_built_once_and_a_left_lock_does_not_hang_the_next_job(tmp_path: Path) -> None:
    env = {ws.CACHE_ENV: str(tmp_path / "cache")}
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("inline_extension.py"), timeout_s=300)
    first = run_harness(spec, env=env).outcome()
    assert first.status is Status.PASSED, first.verdict
    assert "c++ " in first.stdout and "kc_twice.so" in first.stdout, first.stdout[-2000:]
    built = next((tmp_path / "cache" / "torch_extensions").glob("*/kc_twice/kc_twice.so"))
    # A build cut short by a time limit leaves torch's lock beside it.
    (built.parent / "lock").write_text("")
    again = leaderboard_spec(LEADERBOARDS / "addmul", submission("inline_extension.py"), timeout_s=60)
    second = run_harness(again, env=env).outcome()
    assert second.status is Status.PASSED, second.verdict
    assert "ninja: no work to do" in second.stdout, second.stdout[-2000:]
    assert "c++ " not in second.stdout, second.stdout[-2000:]


def test_a_cache_used_in_place_loses_a_left_lock_when_the_job_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelcup.harness.process import Identity

    monkeypatch.setenv(ws.CACHE_ENV, str(tmp_path / "cache"))
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("correct.py"))
    unsandboxed = Identity(uid=None, gid=None, description="no sandbox (test)")
    workspace = ws.Workspace.create(spec, unsandboxed)
    extensions = Path(ws.build_cache_env(spec, workspace)["TORCH_EXTENSIONS_DIR"])
    assert extensions.is_relative_to(tmp_path / "cache")
    (extensions / "kc_twice").mkdir()
    (extensions / "kc_twice" / "lock").write_text("")
    (extensions / "kc_twice" / "kc_twice.so").write_text("built")
    workspace.cleanup()
    assert not (extensions / "kc_twice" / "lock").exists()
    assert (extensions / "kc_twice" / "kc_twice.so").exists()


def test_links_the_job_plants_in_its_cache_lead_the_harness_nowhere(tmp_path: Path) -> None:
    """The job owns its cache copy: a link in place of the folder, or of a folder inside the
    shared cache, must not make the harness copy from or write to where it points."""
    secrets_folder = tmp_path / "elsewhere"
    secrets_folder.mkdir()
    (secrets_folder / "other-contestant.cu").write_text("someone else's kernel")
    shared = tmp_path / "shared"
    shared.mkdir()
    job = tmp_path / "job-cache"
    job.symlink_to(secrets_folder)
    assert ws._copy_tree(job, shared, ws.CACHE_COPY_LIMIT) == 0
    assert list(shared.iterdir()) == []
    source = tmp_path / "job-real"
    (source / "ext").mkdir(parents=True)
    (source / "ext" / "planted.so").write_text("x")
    (shared / "ext").symlink_to(secrets_folder)
    assert ws._copy_tree(source, shared, ws.CACHE_COPY_LIMIT) == 0
    assert sorted(p.name for p in secrets_folder.iterdir()) == ["other-contestant.cu"]


def test_a_later_process_of_the_job_gets_the_same_cache_and_no_second_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kernelcup.harness.process import Identity

    monkeypatch.setenv(ws.CACHE_ENV, str(tmp_path / "cache"))
    spec = leaderboard_spec(LEADERBOARDS / "addmul", submission("correct.py"))
    workspace = ws.Workspace.create(spec, Identity(uid=None, gid=None, description="no sandbox (test)"))
    try:
        first = ws.build_cache_env(spec, workspace)
        assert ws.build_cache_env(spec, workspace) == first
        assert len(workspace.shared) == 3
    finally:
        workspace.cleanup()

