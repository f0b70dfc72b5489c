"""A pull request that adds a submission is run in test mode on open and on each push: a check
run on its head commit and one comment, edited in place, end with the verdict."""

from __future__ import annotations

from tests.github.conftest import REPO, pull_event, solution

FILE = "submissions/vectoradd/alice.py"


async def test_an_opened_pull_request_runs_its_file_in_test_mode_and_passes(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha="a" * 40, files={FILE: solution()})
    assert await github.deliver("pull_request", pull_event("opened", pull)) == 202
    await github.settle()
    [check] = github.fake.checks_on("a" * 40)
    assert check.name == f"kernelcup: {FILE}"
    assert (check.status, check.conclusion) == ("completed", "success")
    assert "all tests passed" in check.output["title"]
    assert "in_progress" in [state.get("status") for state in check.history]  # live status while it ran
    [comment] = github.fake.comments_on(7)
    assert "all tests passed" in comment.body and "(test) by alice" in comment.body
    assert len(comment.edits) >= 2  # queued first, then edited to the report
    [spec] = github.runner.specs
    assert spec.mode == "test" and spec.files[spec.submission_name] == solution().decode()


async def test_a_push_runs_the_new_commit_and_edits_the_same_comment(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 7, author="alice", sha="a" * 40, files={FILE: solution()})
    await github.deliver("pull_request", pull_event("opened", pull))
    await github.settle()
    pull = github.fake.push(REPO, 7, "b" * 40, {FILE: solution() + b"\n# WRONG on purpose\n"})
    assert await github.deliver("pull_request", pull_event("synchronize", pull)) == 202
    await github.settle()
    assert [c.conclusion for c in github.fake.checks_on("a" * 40)] == ["success"]
    [second] = github.fake.checks_on("b" * 40)
    assert second.conclusion == "failure" and "mismatch at index 7" in second.output["title"]
    [comment] = github.fake.comments_on(7)  # one comment per file, edited again
    assert "mismatch at index 7" in comment.body and "all tests passed" not in comment.body
    assert any("all tests passed" in body for body in comment.edits)
    assert [s.mode for s in github.runner.specs] == ["test", "test"]


async def test_a_failing_job_ends_in_failure_with_its_log_collapsed(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 8, author="alice", sha="c" * 40, files={FILE: b"# WRONG\n" + solution()})
    await github.deliver("pull_request", pull_event("opened", pull))
    await github.settle()
    [check] = github.fake.checks_on("c" * 40)
    assert check.conclusion == "failure"
    [comment] = github.fake.comments_on(8)
    assert "❌" in comment.body and "mismatch at index 7" in comment.body
    assert "<details><summary>" in comment.body and "printed by the kernel" in comment.body


async def test_a_file_that_is_not_a_submission_gets_a_neutral_check_and_the_layout(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 9, author="alice", sha="d" * 40,
                                 files={"submissions/notes.md": b"# notes", "src/other.py": b"x = 1\n"})
    await github.deliver("pull_request", pull_event("opened", pull))
    await github.settle()
    [check] = github.fake.checks_on("d" * 40)
    assert (check.name, check.conclusion) == ("kernelcup", "neutral")
    [comment] = github.fake.comments_on(9)
    assert "`submissions/notes.md`" in comment.body and "submissions/<leaderboard>/<name>.py" in comment.body
    assert "src/other.py" not in comment.body and github.runner.specs == []


async def test_a_leaderboard_that_does_not_exist_fails_the_check_and_says_so(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 10, author="alice", sha="e" * 40,
                                 files={"submissions/nosuchboard/alice.py": solution()})
    await github.deliver("pull_request", pull_event("opened", pull))
    await github.settle()
    [check] = github.fake.checks_on("e" * 40)
    assert check.conclusion == "failure" and "nosuchboard" in check.output["title"]
    [comment] = github.fake.comments_on(10)
    assert "nosuchboard" in comment.body and github.runner.specs == []


async def test_a_closed_pull_request_runs_nothing(start) -> None:
    github = await start()
    pull = github.fake.open_pull(REPO, 11, author="alice", sha="f" * 40, files={FILE: solution()})
    await github.deliver("pull_request", pull_event("closed", pull))
    await github.settle()
    assert github.fake.check_runs == {} and github.fake.comments == {}
