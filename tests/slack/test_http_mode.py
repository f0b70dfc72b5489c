"""HTTP mode: only requests signed by Slack, recently, get in; each is acknowledged at once."""

from __future__ import annotations

import time
import urllib.parse

from tests.slack.conftest import SECRET, slash_fields
from tests.slack.fake_slack import block_text


async def test_a_signed_command_is_acknowledged_within_three_seconds(start) -> None:
    slack = await start()
    status, took = await slack.command("list")
    assert status == 200 and took < 3.0
    await slack.settle()
    [posted] = slack.fake.calls_to("chat.postMessage")
    assert "identity" in block_text(posted.params["blocks"])


async def test_a_bad_signature_is_refused_with_401(start) -> None:
    slack = await start()
    body = urllib.parse.urlencode(slash_fields(slack.fake, "pause", user="U9"))
    status, _ = await slack.post(body, "application/x-www-form-urlencoded", secret="not-" + SECRET)
    assert status == 401
    await slack.settle()
    assert slack.fake.calls == []


async def test_a_missing_signature_is_refused_with_401(start) -> None:
    """No X-Slack-Signature and no X-Slack-Request-Timestamp header at all."""
    slack = await start()
    body = urllib.parse.urlencode(slash_fields(slack.fake, "list"))
    status, _ = await slack.post(body, "application/x-www-form-urlencoded", signed=False)
    assert status == 401
    await slack.settle()
    assert slack.fake.calls_to("chat.postMessage") == []


async def test_an_empty_signature_is_refused_with_401(start) -> None:
    slack = await start()
    body = urllib.parse.urlencode(slash_fields(slack.fake, "list"))
    status, _ = await slack.post(body, "application/x-www-form-urlencoded", signature="v0=")
    assert status == 401
    await slack.settle()
    assert slack.fake.calls_to("chat.postMessage") == []


async def test_a_replayed_request_with_an_old_timestamp_is_refused_with_401(start) -> None:
    slack = await start()
    body = urllib.parse.urlencode(slash_fields(slack.fake, "list"))
    status, _ = await slack.post(body, "application/x-www-form-urlencoded", ts=int(time.time()) - 6 * 60)
    assert status == 401
    await slack.settle()
    assert slack.fake.calls_to("chat.postMessage") == []
