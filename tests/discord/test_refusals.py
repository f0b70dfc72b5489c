"""Requests the bot turns down: each gets a private answer that says what to do, and the bot
keeps serving."""

from __future__ import annotations

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.app import Kernelcup
from tests.discord.conftest import SOLUTION, Send, callback, callbacks, original_edit, submit
from tests.discord.fake_discord import (
    ALICE,
    EPHEMERAL,
    ORGANIZER_PERSON,
    OTHER_CHANNEL,
    FakeDiscord,
    description_of,
    slash,
)


async def test_a_participant_may_not_use_admin_commands(adapter: DiscordAdapter, fake: FakeDiscord,
                                                        send: Send) -> None:
    payload = slash(fake, "admin", "pause")
    send(payload)
    answer = await callback(fake, payload)
    assert answer.json is not None and answer.json["data"]["flags"] == EPHEMERAL
    assert "Only admins may use pause." in description_of(answer)


async def test_the_organizers_role_makes_an_admin(adapter: DiscordAdapter, fake: FakeDiscord, send: Send) -> None:
    payload = slash(fake, "admin", "pause", person=ORGANIZER_PERSON)
    send(payload)
    answer = await callback(fake, payload)
    assert answer.json is not None and not answer.json["data"].get("flags")
    assert "Submissions are paused" in description_of(answer)


async def test_submissions_are_refused_outside_the_submission_channels(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, app: Kernelcup) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, mode="test",
                    gpu="cpu", channel_id=OTHER_CHANNEL)
    send(payload)
    answer = await callback(fake, payload)
    assert answer.json is not None and answer.json["data"]["flags"] == EPHEMERAL
    assert "not taken in this channel" in description_of(answer)
    assert not [c for c in fake.calls if c.path.startswith("/cdn/")]  # the file was not even fetched


async def test_a_file_over_the_limit_is_refused_before_it_is_downloaded(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send) -> None:
    huge = b"# padding\n" * 200_000  # 2 MB; the limit is 1 MiB
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", huge)}, mode="test", gpu="cpu")
    send(payload)
    refusal = await original_edit(fake, payload)
    assert "the limit is 1024 KiB" in description_of(refusal)
    assert not [c for c in fake.calls if c.path.startswith("/cdn/")]
    assert fake.original(payload["token"])["flags"] & EPHEMERAL


async def test_a_file_of_the_wrong_type_gets_a_private_hint(adapter: DiscordAdapter, fake: FakeDiscord,
                                                            send: Send) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.txt", SOLUTION)}, mode="test",
                    gpu="cpu")
    send(payload)
    refusal = await original_edit(fake, payload)
    assert "kernel.txt is not a .py file" in description_of(refusal)
    assert "template identity" in description_of(refusal)
    assert fake.original(payload["token"])["flags"] & EPHEMERAL


async def test_a_banned_user_is_told_so_privately(adapter: DiscordAdapter, fake: FakeDiscord, send: Send) -> None:
    await submit(fake, send)  # alice is known to the bot once she has submitted
    ban = slash(fake, "admin", "ban", user=f"<@{ALICE}>", person=ORGANIZER_PERSON)
    send(ban)
    assert "is banned" in description_of(await callback(fake, ban))
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, mode="test", gpu="cpu")
    send(payload)
    refusal = await original_edit(fake, payload)
    assert "You are banned from submitting." in description_of(refusal)
    assert len(callbacks(fake, payload)) == 1


async def test_ones_own_code_before_the_deadline_is_shown_privately(adapter: DiscordAdapter, fake: FakeDiscord,
                                                                     send: Send) -> None:
    await submit(fake, send)
    payload = slash(fake, "leaderboard", "get-submission", id=1)
    send(payload)
    answer = await callback(fake, payload)
    assert answer.json is not None and answer.json["data"]["flags"] == EPHEMERAL
    assert "kernel.py" in answer.files


async def test_an_unknown_leaderboard_is_named_in_a_private_answer(adapter: DiscordAdapter, fake: FakeDiscord,
                                                                   send: Send) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, mode="test",
                    leaderboard="nosuchboard", gpu="cpu")
    send(payload)
    refusal = await original_edit(fake, payload)
    assert "nosuchboard" in description_of(refusal)
    assert fake.original(payload["token"])["flags"] & EPHEMERAL
