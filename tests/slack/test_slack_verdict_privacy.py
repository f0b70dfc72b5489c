"""``/leaderboard get-submission`` on Slack, a signed slash command through slack-bolt against the
fake Slack, of another user's failed run in the real harness (SECURITY.md, *What a submission
shows whom*).

Alice (U2) shares a kernel that raises ``ValueError`` quoting a marker; Bob (U5) looks it up.
Everything the bot sends Slack for Bob's command (the response-URL answer, any post, any file
upload) is ephemeral or his own, and tells the status and public verdict only: no exception
text, logs or code. Alice's own look-up quotes the marker (the control)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from sqlmodel import select

from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard
from tests.slack.conftest import NOW, USER, Slack, file_message, local_runner
from tests.slack.fake_slack import FakeSlack, block_text

pytestmark = pytest.mark.slow

MARKER = "SECRET-MARKER-123"
RAISES = f'''#!POPCORN leaderboard identity
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    print("stdout of the kernel")
    raise ValueError("{MARKER}")
'''.encode()
PASSES = b'''#!POPCORN leaderboard identity
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    print("stdout of the kernel")  # PRIVATE-CODE-MARKER
    x, output = data
    output[...] = x
    return output
'''
BOB = "U5"


def _ended(fake: FakeSlack, mark: str = "❌") -> bool:
    return any(mark in block_text(c.params["blocks"]) for c in fake.calls_to("chat.update"))


async def _answer_to(slack: Slack, user: str) -> tuple[list[dict[str, Any]], str]:
    """What Slack received for ``user``'s get-submission: the response-URL answers, and the text
    of every answer, Web API call and uploaded file together."""
    fake = slack.fake
    calls, responses, uploads = len(fake.calls), len(fake.responses), set(fake.uploads)
    await slack.command("get-submission 1", user=user)
    await fake.wait_for(lambda: len(fake.responses) > responses or len(fake.calls) > calls)
    await slack.settle()
    answers = fake.responses[responses:]
    files = [upload for file_id, upload in fake.uploads.items() if file_id not in uploads]
    seen = json.dumps([answers, [call.params for call in fake.calls[calls:]]], ensure_ascii=False)
    seen += "".join(f"{upload['filename']}\n{upload.get('content', b'').decode(errors='replace')}"
                    for upload in files)
    return answers, seen


async def test_get_submission_on_slack_shows_another_user_no_exception_text_logs_or_code(start: Any) -> None:
    slack: Slack = await start(runner=local_runner())
    await slack.event(file_message("submit test identity", slack.fake.host_file("kernel.py", RAISES)))
    await slack.fake.wait_for(lambda: _ended(slack.fake), timeout=120)
    await slack.settle()

    answers, seen = await _answer_to(slack, BOB)
    assert [answer["response_type"] for answer in answers] == ["ephemeral"], seen
    assert MARKER not in seen and "stdout of the kernel" not in seen and "custom_kernel" not in seen, seen
    assert "crashed" in block_text(answers[0]["blocks"])

    _, own = await _answer_to(slack, USER)
    assert MARKER in own  # the author reads what her code raised


def _pass_the_deadline(slack: Slack, *, code_public: bool) -> None:
    """identity's deadline is past, and its task says whether code is public after it."""
    with session_scope(slack.app.engine) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == "identity")).one()
        board.task_json = json.dumps({**json.loads(board.task_json), "code_public_after_deadline": code_public})
        board.deadline = NOW - timedelta(days=1)
        session.add(board)


@pytest.mark.parametrize("code_public", [False, True])
async def test_get_submission_on_slack_keeps_code_private_after_the_deadline_where_the_leaderboard_says_so(
    start: Any, code_public: bool
) -> None:
    """A passing run: after the deadline Bob gets its code and logs only where the leaderboard
    makes code public then (the control, which shows the deadline has passed)."""
    slack: Slack = await start(runner=local_runner())
    await slack.event(file_message("submit test identity", slack.fake.host_file("kernel.py", PASSES)))
    await slack.fake.wait_for(lambda: _ended(slack.fake, "✅"), timeout=120)
    await slack.settle()
    _pass_the_deadline(slack, code_public=code_public)

    answers, seen = await _answer_to(slack, BOB)
    assert [answer["response_type"] for answer in answers] == ["ephemeral"], seen
    assert ("PRIVATE-CODE-MARKER" in seen) is code_public and ("stdout of the kernel" in seen) is code_public, seen
