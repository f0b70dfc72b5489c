"""Only deliveries signed with the webhook secret get in, and each delivery id runs once, even
after a restart."""

from __future__ import annotations

import structlog

from tests.github.conftest import REPO, SECRET, pull_event, solution

FILE = "submissions/vectoradd/alice.py"


async def test_a_bad_signature_is_refused_with_401_logged_and_runs_nothing(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha="a" * 40, files={FILE: solution()})
    with structlog.testing.capture_logs() as said:
        status = await github.deliver("pull_request", pull_event("opened", pull), secret="not-" + SECRET)
    assert status == 401
    assert any("bad or missing signature" in line["event"] for line in said)
    await github.settle()
    assert github.fake.calls == [] and github.runner.specs == []


async def test_a_missing_or_sha1_only_signature_is_refused_with_401(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha="a" * 40, files={FILE: solution()})
    assert await github.deliver("pull_request", pull_event("opened", pull), signed=False) == 401
    assert await github.deliver("pull_request", pull_event("opened", pull), signature="sha1=0123abcd") == 401
    assert await github.deliver("pull_request", pull_event("opened", pull), signature="sha256=") == 401
    await github.settle()
    assert github.fake.calls == []


async def test_a_repeated_delivery_runs_once(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha="a" * 40, files={FILE: solution()})
    assert await github.deliver("pull_request", pull_event("opened", pull), delivery="d-1") == 202
    assert await github.deliver("pull_request", pull_event("opened", pull), delivery="d-1") == 200
    await github.settle()
    assert len(github.fake.checks_on("a" * 40)) == 1 and len(github.runner.specs) == 1


async def test_a_delivery_repeated_after_a_restart_still_runs_once(start, tmp_path) -> None:
    database = tmp_path / "kept.db"
    first = await start(database=database)
    pull = first.fake.open_pull(REPO, 7, author="alice", sha="a" * 40, files={FILE: solution()})
    await first.deliver("pull_request", pull_event("opened", pull), delivery="d-2")
    await first.settle()
    await first.adapter.stop()
    again = await start(database=database)
    assert await again.deliver("pull_request", pull_event("opened", pull), delivery="d-2") == 200
    await again.settle()
    assert len(again.fake.checks_on("a" * 40)) == 1 and again.runner.specs == []


async def test_a_ping_is_answered(start) -> None:
    github = await start()
    assert await github.deliver("ping", {"zen": "Keep it logically awesome.", "hook_id": 1}) == 200
