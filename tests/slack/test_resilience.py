"""Slack misbehaving or users doing odd things: the answer still arrives, the bot keeps serving."""

from __future__ import annotations

import time

from kernelcup.adapters.slack.blocks import GPU_CHOICE_ACTION, GPU_SUBMIT_ACTION
from tests.slack.conftest import CHANNEL, DM, USER, GatedRunner, InstantRunner, file_message, posts_in, solution
from tests.slack.fake_slack import TEAM, FakeSlack, block_text


def message_text(fake: FakeSlack, channel: str) -> str:
    """The text of the bot's newest message in a channel, as it stands now."""
    mine = [message for (where, _), message in fake.messages.items() if where == channel]
    return block_text(mine[-1]["blocks"]) if mine else ""


async def test_a_rate_limited_call_is_retried_after_retry_after(start) -> None:
    slack = await start()
    slack.fake.fail("chat.postMessage", status=429, error="ratelimited", headers={"Retry-After": "0"})
    await slack.command("list")
    await slack.fake.wait_for(lambda: slack.fake.messages, timeout=10)
    await slack.settle()
    assert len(slack.fake.calls_to("chat.postMessage")) == 2
    [(channel, _)] = slack.fake.messages
    assert channel == CHANNEL


async def test_a_deleted_progress_message_is_replaced_by_a_new_one(start) -> None:
    runner = GatedRunner()
    slack = await start(runner=runner)
    await slack.event(file_message("submit test identity", slack.fake.host_file("k.py", solution())))
    await slack.fake.wait_for(lambda: posts_in(slack.fake, DM))
    [(_, old_ts)] = slack.fake.messages
    slack.fake.delete_message(DM, old_ts)  # as a user deleting the bot's message would
    runner.gate.set()
    await slack.fake.wait_for(lambda: len(posts_in(slack.fake, DM)) == 2)
    await slack.settle()
    [(_, new_ts)] = slack.fake.messages
    assert new_ts != old_ts
    assert "✅ all tests passed" in block_text(slack.fake.messages[(DM, new_ts)]["blocks"])
    # Nothing edits the deleted message once its replacement is posted. Which edit found it gone
    # depends on timing: a progress edit (the result then edits the new message) or, where the
    # job ended before any progress went out, the result's own (the new message then carries it).
    calls = slack.fake.calls
    replaced = max(i for i, call in enumerate(calls) if call.method == "chat.postMessage")
    assert all(call.params["ts"] == new_ts for call in calls[replaced + 1 :] if call.method == "chat.update")


async def test_live_edits_are_throttled(start) -> None:
    runner = GatedRunner(steps=40)
    slack = await start(runner=runner, update_interval_s=0.5)
    await slack.event(file_message("submit test identity", slack.fake.host_file("k.py", solution())))
    await slack.fake.wait_for(lambda: posts_in(slack.fake, DM))
    started = time.monotonic()
    await slack.fake.wait_for(lambda: "testing 39/40" in message_text(slack.fake, DM))
    runner.gate.set()
    await slack.fake.wait_for(lambda: "✅" in message_text(slack.fake, DM))
    elapsed = time.monotonic() - started
    await slack.settle()
    assert len(slack.fake.calls_to("chat.update")) <= elapsed / 0.5 + 2  # not one per event (40+)


async def test_several_gpus_to_choose_from_bring_a_menu_whose_choice_submits(start) -> None:
    slack = await start(runner=InstantRunner(("cpu", "H100")))
    await slack.event(file_message("submit test identity", slack.fake.host_file("k.py", solution())))
    [menu] = await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postEphemeral"))
    actions = next(b for b in menu.params["blocks"] if b["type"] == "actions")
    select, button = actions["elements"]
    assert {o["value"] for o in select["options"]} == {"cpu", "H100"}
    assert slack.fake.calls_to("chat.postMessage") == []

    chosen = {actions["block_id"]: {GPU_CHOICE_ACTION: {"type": "multi_static_select",
                                                        "selected_options": [{"value": "H100"}]}}}
    await slack.interaction({
        "type": "block_actions", "team": {"id": TEAM}, "user": {"id": USER, "team_id": TEAM}, "api_app_id": "A1",
        "token": "legacy", "trigger_id": "trigger.4", "container": {"type": "message", "is_ephemeral": True},
        "channel": {"id": DM}, "response_url": slack.fake.response_url("choice"), "state": {"values": chosen},
        "actions": [{"type": "button", "action_id": GPU_SUBMIT_ACTION, "block_id": actions["block_id"],
                     "value": button["value"], "action_ts": "1700000000.2"}],
    })
    await slack.fake.wait_for(lambda: "✅" in message_text(slack.fake, DM))
    await slack.settle()
    assert slack.fake.responses[0]["text"] == "Submitting on H100."
    assert "[H100] ✅" in message_text(slack.fake, DM)


async def test_the_bot_keeps_serving_after_slack_refuses_a_reply(start) -> None:
    slack = await start()
    slack.fake.fail("chat.postMessage", error="invalid_blocks")
    await slack.command("list")
    await slack.settle()
    await slack.command("list")
    await slack.fake.wait_for(lambda: slack.fake.messages)
