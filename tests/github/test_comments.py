"""``/kernelcup ...`` comments on a pull request: submit its file in another mode, or run any
core command (show, task, template) with the pull request's leaderboard."""

from __future__ import annotations

from tests.github.conftest import REPO, comment_event, solution

FILE = "submissions/vectoradd/alice.py"


def opened(github, number: int = 7, sha: str = "a" * 40, **options):
    return github.fake.open_pull(REPO, number, author="alice", sha=sha, files={FILE: solution()}, **options)


async def test_submit_ranked_in_a_comment_runs_the_file_ranked_with_its_own_check_and_comment(start) -> None:
    github = await start()
    pull = opened(github)
    assert await github.deliver("issue_comment", comment_event(pull, "/kernelcup submit ranked --gpu cpu",
                                                               "alice")) == 202
    await github.settle()
    [check] = github.fake.checks_on("a" * 40)
    assert check.name == f"kernelcup: {FILE} (ranked)" and check.conclusion == "success"
    assert "rank 1 on cpu" in check.output["summary"]
    [comment] = github.fake.comments_on(7)
    assert "(ranked) by alice" in comment.body and "rank 1 on cpu" in comment.body
    assert [(s.mode, s.gpu.name) for s in github.runner.specs] == [("ranked", "cpu")]


async def test_show_in_a_comment_answers_for_the_pull_requests_leaderboard(start) -> None:
    github = await start()
    pull = opened(github)
    await github.deliver("issue_comment", comment_event(pull, "Looks good.\n/kernelcup show", "bob"))
    await github.settle()
    [comment] = github.fake.comments_on(7)
    assert comment.body.startswith("@bob\n> `/kernelcup show`") and "vectoradd" in comment.body
    assert github.fake.check_runs == {}


async def test_template_in_a_comment_answers_with_the_file_collapsed(start) -> None:
    github = await start()
    pull = opened(github)
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup template", "bob"))
    await github.settle()
    [comment] = github.fake.comments_on(7)
    assert "<details>" in comment.body and "custom_kernel" in comment.body


async def test_an_unknown_command_answers_with_the_error(start) -> None:
    github = await start()
    pull = opened(github)
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup frobnicate", "bob"))
    await github.settle()
    [comment] = github.fake.comments_on(7)
    assert "frobnicate" in comment.body and "❌" in comment.body


async def test_a_comment_without_the_command_or_from_a_bot_is_left_alone(start) -> None:
    github = await start()
    pull = opened(github)
    await github.deliver("issue_comment", comment_event(pull, "Nice kernel! kernelcup rocks", "bob"))
    bot = comment_event(pull, "/kernelcup submit ranked", "kernelcup[bot]")
    bot["comment"]["user"]["type"] = "Bot"
    await github.deliver("issue_comment", bot)
    await github.settle()
    assert github.fake.comments == {} and github.runner.specs == []


async def test_someone_else_may_not_submit_the_authors_file(start) -> None:
    github = await start()
    pull = opened(github)
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup submit ranked", "mallory"))
    await github.settle()
    [comment] = github.fake.comments_on(7)
    assert "Only @alice" in comment.body and github.runner.specs == []


async def test_token_is_never_answered_in_a_public_comment(start) -> None:
    github = await start()
    pull = opened(github)
    await github.deliver("issue_comment", comment_event(pull, "/kernelcup token", "alice"))
    await github.settle()
    [comment] = github.fake.comments_on(7)
    assert "a comment is public" in comment.body and "kc_" not in comment.body
