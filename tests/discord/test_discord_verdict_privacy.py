"""``/leaderboard get-submission`` on Discord, through discord.py against the fake Discord, of
another user's failed run in the real harness (SECURITY.md, *What a submission shows whom*).

Alice's kernel raises ``ValueError`` quoting a marker; Bob looks it up with the slash command.
His answer (embeds, content, files) is private to him and tells the status and public verdict
only: no exception text, logs or code. Alice's own look-up quotes the marker (the control)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.config import Settings
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard
from kernelcup.runners.local import LocalRunner
from tests.discord.conftest import Send, callback, final_edit
from tests.discord.fake_discord import EPHEMERAL, PARTICIPANT, Call, FakeDiscord, Person, slash

pytestmark = pytest.mark.slow

MARKER = "SECRET-MARKER-123"
RAISES = f'''#!POPCORN leaderboard identity
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    print("stdout of the kernel")
    raise ValueError("{MARKER}")
'''
PASSES = '''#!POPCORN leaderboard identity
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    print("stdout of the kernel")  # PRIVATE-CODE-MARKER
    x, output = data
    output[...] = x
    return output
'''
BOB = Person(500000000000000042, "bob")


@pytest.fixture
def runner(settings: Settings) -> LocalRunner:
    return LocalRunner(settings, gpu="cpu")


def _everything(call: Call) -> str:
    """All an answer carries: its JSON (embeds, content, flags) and its files' names and bytes."""
    files = "".join(f"{name}\n{data.decode(errors='replace')}" for name, data in call.files.items())
    return json.dumps(call.json) + files


async def _alice_submits(fake: FakeDiscord, send: Send, code: str = RAISES) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", code.encode())}, mode="test",
                    gpu="cpu")
    send(payload)
    await final_edit(fake)


async def _get_submission(fake: FakeDiscord, send: Send, person: Person) -> Call:
    payload = slash(fake, "leaderboard", "get-submission", id=1, person=person)
    send(payload)
    return await callback(fake, payload)


async def test_get_submission_on_discord_shows_another_user_no_exception_text_logs_or_code(
    adapter: DiscordAdapter, fake: FakeDiscord, send: Send
) -> None:
    await _alice_submits(fake, send)
    seen = await _get_submission(fake, send, BOB)
    assert seen.json is not None and seen.json["data"]["flags"] == EPHEMERAL
    text = _everything(seen)
    assert MARKER not in text and "stdout of the kernel" not in text and "custom_kernel" not in text, text
    assert "crashed" in text
    assert not seen.files, list(seen.files)  # no code, no logs

    own = _everything(await _get_submission(fake, send, PARTICIPANT))
    assert MARKER in own  # the author reads what her code raised


def _pass_the_deadline(store: Engine, *, code_public: bool) -> None:
    """identity's deadline is past, and its task says whether code is public after it."""
    with session_scope(store) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == "identity")).one()
        board.task_json = json.dumps({**json.loads(board.task_json), "code_public_after_deadline": code_public})
        board.deadline = datetime.now(UTC) - timedelta(days=1)
        session.add(board)


@pytest.mark.parametrize("code_public", [False, True])
async def test_get_submission_on_discord_keeps_code_private_after_the_deadline_where_the_leaderboard_says_so(
    adapter: DiscordAdapter, fake: FakeDiscord, send: Send, store: Engine, code_public: bool
) -> None:
    """A passing run: after the deadline Bob gets its code and logs only where the leaderboard
    makes code public then (the control, which shows the deadline has passed)."""
    await _alice_submits(fake, send, PASSES)
    _pass_the_deadline(store, code_public=code_public)
    seen = await _get_submission(fake, send, BOB)
    text = _everything(seen)
    assert "✅" in text or "passed" in text, text
    assert ("PRIVATE-CODE-MARKER" in text) is code_public and ("stdout of the kernel" in text) is code_public, text
