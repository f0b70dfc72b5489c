"""Live progress: throttled edits, and delivery after the interaction token has died."""

from __future__ import annotations

import asyncio
import itertools
import time

import discord
import pytest

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.adapters.discord.live import ThrottledEdits
from tests.discord.conftest import Clock, GatedRunner, Send, final_edit, settled, submit
from tests.discord.fake_discord import ALICE, OTHER_CHANNEL, SUBMIT_CHANNEL, FakeDiscord, embeds_of, slash


async def test_progress_edits_come_at_most_once_per_interval(adapter: DiscordAdapter, fake: FakeDiscord,
                                                             send: Send, runner: GatedRunner) -> None:
    runner.progress_steps = 40
    _, message_id = await submit(fake, send)
    await final_edit(fake, message_id)
    edits = [c for c in fake.calls if c.method == "PATCH" and c.path.endswith(f"/messages/{message_id}")]
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(edits)]
    assert 2 <= len(edits) < 20
    assert min(gaps) >= 0.3 * 0.9  # edit_interval_s of the test config


async def test_an_expired_token_falls_back_to_editing_through_the_channel(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, runner: GatedRunner) -> None:
    runner.gate.clear()
    payload, message_id = await submit(fake, send)
    await runner.started.wait()
    fake.expired_tokens.add(payload["token"])  # Discord ends the token earlier than we expect
    runner.gate.set()
    final = await final_edit(fake, message_id)
    assert final.path == f"/channels/{SUBMIT_CHANNEL}/messages/{message_id}"
    refused = [c for c in fake.calls if c.status == 401]
    assert refused and all(c.path.startswith("/webhooks/") for c in refused)


async def _quiet(fake: FakeDiscord, for_s: float = 0.7, limit_s: float = 10.0) -> None:
    """Wait until the fake server has seen no new call for ``for_s``: longer than the edit
    interval (0.3 s) and an edit's own time, so a progress edit still waiting its turn lands
    inside the window instead of just after it."""
    waited = 0.0
    seen = -1
    while len(fake.calls) != seen and waited < limit_s:
        seen = len(fake.calls)
        await asyncio.sleep(for_s)
        waited += for_s


async def test_after_fifteen_minutes_the_token_is_not_tried_at_all(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, runner: GatedRunner, clock: Clock) -> None:
    runner.gate.clear()
    payload, message_id = await submit(fake, send)
    await runner.started.wait()
    await _quiet(fake)  # an edit already sent through the token may still be landing
    clock.advance(minutes=15)
    fake.expired_tokens.add(payload["token"])
    mark = len(fake.calls)
    runner.gate.set()
    final = await final_edit(fake, message_id)
    assert final.path == f"/channels/{SUBMIT_CHANNEL}/messages/{message_id}"
    assert not [c for c in fake.calls[mark:] if c.path.startswith("/webhooks/")]


async def test_a_deleted_message_is_replaced_by_a_new_one_that_mentions_the_submitter(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, runner: GatedRunner) -> None:
    runner.gate.clear()
    payload, message_id = await submit(fake, send)
    await runner.started.wait()
    fake.expired_tokens.add(payload["token"])
    del fake.messages[message_id]  # someone deleted the bot's message
    runner.gate.set()
    await final_edit(fake)
    reposted = fake.find("POST", f"/channels/{SUBMIT_CHANNEL}/messages")
    assert any(f"<@{ALICE}>" in (c.json or {}).get("content", "") and embeds_of(c) for c in reposted)


async def test_a_deleted_channel_ends_the_conversation_but_not_the_bot(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, runner: GatedRunner) -> None:
    runner.gate.clear()
    payload, _ = await submit(fake, send)
    await runner.started.wait()
    fake.expired_tokens.add(payload["token"])
    fake.deleted_channels.add(SUBMIT_CHANNEL)
    runner.gate.set()
    await asyncio.sleep(0.1)
    await settled(adapter)
    assert [c for c in fake.calls if c.status == 404 and c.path.startswith(f"/channels/{SUBMIT_CHANNEL}")]
    send(later := slash(fake, "leaderboard", "list", channel_id=OTHER_CHANNEL))
    answer = await fake.wait_for(lambda c: c.path.endswith(f"{later['token']}/callback"))
    assert "Leaderboards" in embeds_of(answer[0])[0]["description"]


async def test_the_interval_counts_from_the_end_of_a_slow_edit() -> None:
    # A progress edit that takes long (a loaded database read, a slow request) must not let the
    # next edit reach Discord within the interval of it (seen on a loaded CI box: 30 ms apart).
    started: list[float] = []

    async def slow_edit(embed: discord.Embed) -> None:
        started.append(time.monotonic())
        await asyncio.sleep(0.2)

    edits = ThrottledEdits(slow_edit, 0.3)
    edits.show(discord.Embed(title="first"))
    await asyncio.sleep(0.05)
    edits.show(discord.Embed(title="second"))
    await edits.settle()
    assert len(started) == 2
    assert started[1] - started[0] >= 0.2 + 0.3 * 0.95


async def test_a_progress_edit_whose_connection_breaks_is_skipped_and_the_next_goes_out() -> None:
    # aiohttp's errors are not discord.HTTPException: a server that hung up on one progress edit
    # must not end the edits, nor make the final settle raise before the result is shown.
    import aiohttp

    shown: list[str] = []

    async def flaky_edit(embed: discord.Embed) -> None:
        if not shown:
            shown.append("broken")
            raise aiohttp.ServerDisconnectedError()
        shown.append(str(embed.title))

    edits = ThrottledEdits(flaky_edit, 0.05)
    edits.show(discord.Embed(title="first"))
    await edits.settle()
    edits.show(discord.Embed(title="second"))
    await edits.settle()
    assert shown == ["broken", "second"] and edits.edits == 1


async def test_the_results_edit_is_tried_again_where_the_connection_breaks() -> None:
    # The report is claimed before its edit: no other process shows it if this one is lost.
    import aiohttp

    from kernelcup.adapters.discord.follow import edit_final

    class Live:
        def __init__(self, failures: int) -> None:
            self.failures = failures
            self.shown: list[str | None] = []

        async def edit(self, embed: discord.Embed) -> None:
            if self.failures:
                self.failures -= 1
                raise aiohttp.ServerDisconnectedError()
            self.shown.append(embed.title)

    flaky = Live(failures=2)
    await edit_final(flaky, discord.Embed(title="result"), 7, delays_s=(0.01, 0.01))  # type: ignore[arg-type]
    assert flaky.shown == ["result"]
    gone = Live(failures=3)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await edit_final(gone, discord.Embed(title="result"), 7, delays_s=(0.01, 0.01))  # type: ignore[arg-type]
    assert gone.shown == []
