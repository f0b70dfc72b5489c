"""Discord answering 429 (rate limited) and 5xx: discord.py waits ``retry_after`` and retries;
what still fails is logged, the submission is still delivered and the bot keeps serving."""

from __future__ import annotations

from kernelcup.adapters.discord.adapter import DiscordAdapter
from tests.discord.conftest import GatedRunner, Send, callback, final_edit, submit
from tests.discord.fake_discord import APP_ID, OTHER_CHANNEL, SUBMIT_CHANNEL, FakeDiscord, embeds_of, slash


async def test_a_rate_limited_request_is_retried_after_retry_after(adapter: DiscordAdapter, fake: FakeDiscord,
                                                                    send: Send) -> None:
    fake.fail("POST", rf"/webhooks/{APP_ID}/[^/]+", 429, retry_after=0.5)
    _, message_id = await submit(fake, send)
    limited, retried = [c for c in fake.calls if c.method == "POST" and c.path.startswith("/webhooks/")][:2]
    assert (limited.status, retried.status) == (429, 200)
    assert retried.at - limited.at >= 0.45
    await final_edit(fake, message_id)


async def test_a_server_error_on_an_edit_is_retried(adapter: DiscordAdapter, fake: FakeDiscord, send: Send,
                                                    runner: GatedRunner) -> None:
    runner.gate.clear()
    _, message_id = await submit(fake, send)
    await runner.started.wait()
    fake.fail("PATCH", rf"/webhooks/{APP_ID}/[^/]+/messages/{message_id}", 500)
    runner.gate.set()
    final = await final_edit(fake, message_id)
    failed = next(c for c in fake.calls if c.status == 500)
    assert final.at - failed.at >= 0.9  # discord.py waits a second before trying again


async def test_threads_failing_for_good_still_deliver_the_result(adapter: DiscordAdapter, fake: FakeDiscord,
                                                                 send: Send) -> None:
    fake.fail("POST", rf"/channels/{SUBMIT_CHANNEL}/threads", 503)
    fake.fail("POST", rf"/channels/{SUBMIT_CHANNEL}/messages/\d+/threads", 503)
    _, message_id = await submit(fake, send)
    final = await final_edit(fake, message_id)
    assert embeds_of(final)[0]["fields"][0]["value"] == "In the replies below."
    details = fake.find("POST", f"/channels/{SUBMIT_CHANNEL}/messages")
    assert any((c.json or {}).get("message_reference", {}).get("message_id") in (message_id, str(message_id))
               for c in details)

    later = slash(fake, "leaderboard", "list", channel_id=OTHER_CHANNEL)
    send(later)
    assert "identity" in embeds_of(await callback(fake, later))[0]["description"]
