"""A pull request from a fork runs only in test mode, and only after a maintainer's approval."""

from __future__ import annotations

from tests.github.conftest import REPO, comment_event, pull_event, solution

FILE = "submissions/vectoradd/eve.py"
SHA = "f" * 40


def forked(github):
    return github.fake.open_pull(REPO, 12, author="eve", sha=SHA, files={FILE: solution()},
                                 head_repo="eve/kernels")


async def test_a_forks_pull_request_waits_for_approval_and_then_runs_in_test_mode(start) -> None:
    github = await start()
    pull = forked(github)
    await github.deliver("pull_request", pull_event("opened", pull))
    await github.settle()
    [waiting] = github.fake.checks_on(SHA)
    assert waiting.conclusion == "action_required" and waiting.details_url == pull["html_url"]
    [note] = github.fake.comments_on(12)
    assert "/kernelcup approve" in note.body and github.runner.specs == []

    await github.deliver("issue_comment", comment_event(pull, "/kernelcup approve", "maintainer", "MEMBER"))
    await github.settle()
    ran = [c for c in github.fake.checks_on(SHA) if c.id != waiting.id]
    assert [c.conclusion for c in ran] == ["success"]
    [spec] = github.runner.specs
    assert spec.mode == "test"
    assert any("(test) by eve" in c.body for c in github.fake.comments_on(12))  # the author's submission


async def test_the_fork_author_can_neither_approve_nor_start_a_run(start) -> None:
    github = await start()
    pull = forked(github)
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup approve", "eve", "CONTRIBUTOR"))
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup submit test", "eve", "CONTRIBUTOR"))
    await github.settle()
    bodies = [c.body for c in github.fake.comments_on(12)]
    assert any("Only a maintainer may approve" in b for b in bodies)
    assert any("after a maintainer's approval" in b for b in bodies)
    assert github.runner.specs == []


async def test_a_fork_never_runs_ranked_even_for_a_maintainer(start) -> None:
    github = await start()
    pull = forked(github)
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup submit ranked", "octo-admin", "OWNER"))
    await github.settle()
    [comment] = github.fake.comments_on(12)
    assert "runs only in test mode" in comment.body and github.runner.specs == []


async def test_without_fork_approval_a_forks_pull_request_runs_in_test_mode_at_once(start) -> None:
    github = await start(fork_approval=False)
    pull = forked(github)
    await github.deliver("pull_request", pull_event("opened", pull))
    await github.settle()
    assert [c.conclusion for c in github.fake.checks_on(SHA)] == ["success"]
    assert [s.mode for s in github.runner.specs] == ["test"]
