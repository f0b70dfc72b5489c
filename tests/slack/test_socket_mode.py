"""Socket Mode: the bot dials Slack's websocket (no public URL) and acknowledges each envelope."""

from __future__ import annotations

from tests.slack.conftest import slash_fields, socket_env
from tests.slack.fake_slack import APP_TOKEN, block_text


async def test_a_slash_command_over_the_websocket_is_acknowledged_and_answered(start) -> None:
    slack = await start(env=socket_env())
    [opened] = slack.fake.calls_to("apps.connections.open")
    assert opened.token == APP_TOKEN
    envelope = {"envelope_id": "env-1", "type": "slash_commands", "accepts_response_payload": True,
                "payload": slash_fields(slack.fake, "list")}
    await slack.fake.socket_send(envelope)
    await slack.fake.wait_for(lambda: [a for a in slack.fake.socket_acks if a.get("envelope_id") == "env-1"])
    [posted] = await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    assert "identity" in block_text(posted.params["blocks"])


async def test_socket_mode_is_the_default_when_an_app_token_is_set(start) -> None:
    slack = await start(env={**socket_env(), "SLACK_SIGNING_SECRET": "also-set"})
    assert slack.adapter.slack.mode == "socket" and slack.adapter.port is None
