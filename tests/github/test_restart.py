"""An adapter that stopped while a submission ran follows it again when it starts: the same
check run and the same comment end with the report."""

from __future__ import annotations

import asyncio

from kernelcup.adapters.github.adapter import GitHubAdapter
from kernelcup.adapters.github.origin import Origin
from tests.github.conftest import ENV, REPO, pull_event, solution
from tests.github.test_live import wait_for

FILE = "submissions/vectoradd/alice.py"
SHA = "a" * 40


def test_a_reply_to_keeps_the_comments_key_with_its_slashes() -> None:
    origin = Origin("team/kernels", 7, 101, 102, f"{FILE}:test")
    assert Origin.parse(origin.reply_to) == origin


async def test_a_submission_running_when_the_adapter_stopped_is_finished_by_the_next_one(start) -> None:
    github = await start()
    github.runner.gate = asyncio.Event()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha=SHA, files={FILE: solution()})
    await github.deliver("pull_request", pull_event("opened", pull))
    await wait_for(lambda: any("testing 1/2" in str(c.output.get("title")) for c in github.fake.checks_on(SHA)))
    await github.adapter.stop()  # the job goes on in the core; nobody follows it here
    await asyncio.sleep(0.2)

    again = GitHubAdapter(github.app.settings, ENV)
    serving = asyncio.create_task(again.run(github.app))
    await asyncio.wait_for(again.ready.wait(), 10)
    github.runner.gate.set()
    await asyncio.sleep(0.05)
    await again.idle()
    await again.stop()
    await serving

    [check] = github.fake.checks_on(SHA)
    assert (check.status, check.conclusion) == ("completed", "success")
    [comment] = github.fake.comments_on(7)
    assert comment.body.startswith(f"<!-- kernelcup:{FILE}:test -->")  # found again on the next push
    assert "all tests passed" in comment.body  # written by the second adapter: the first had stopped
