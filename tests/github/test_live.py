"""While a job runs, its check run is in progress and shows the job's live status, and so does
the comment; both end with the report."""

from __future__ import annotations

import asyncio

from tests.github.conftest import REPO, pull_event, solution

FILE = "submissions/vectoradd/alice.py"
SHA = "a" * 40


async def wait_for(condition, budget_s: float = 20.0) -> None:
    deadline = asyncio.get_running_loop().time() + budget_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.02)


async def test_a_running_job_shows_its_live_status_on_the_check_and_the_comment(start) -> None:
    github = await start()
    github.runner.gate = asyncio.Event()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha=SHA, files={FILE: solution()})
    await github.deliver("pull_request", pull_event("opened", pull))

    def running() -> bool:
        checks = github.fake.checks_on(SHA)
        return bool(checks) and "testing 1/2" in str(checks[0].output.get("title"))

    await wait_for(running)
    [check] = github.fake.checks_on(SHA)
    assert check.status == "in_progress" and check.conclusion is None
    [comment] = github.fake.comments_on(7)
    await wait_for(lambda: "testing 1/2" in comment.body)
    assert f"`{FILE}` at aaaaaaa" in comment.body

    github.runner.gate.set()
    await github.settle()
    [ended] = github.fake.checks_on(SHA)  # the same check run, read again
    assert ended.id == check.id and (ended.status, ended.conclusion) == ("completed", "success")
    assert "testing 1/2" not in comment.body and "all tests passed" in comment.body
