"""Submitting through the form that ``/leaderboard submit`` opens."""

from __future__ import annotations

import json
from typing import Any

from kernelcup.adapters.slack.modal import CALLBACK_ID, LEADERBOARD_ACTION
from tests.slack.conftest import CHANNEL, USER, InstantRunner, local_runner, solution
from tests.slack.fake_slack import TEAM, block_text


def element(view: dict[str, Any], block_id: str) -> dict[str, Any]:
    return next(b["element"] for b in view["blocks"] if b.get("block_id") == block_id)


def values(view: dict[str, Any], file: dict[str, Any], board: str | None, mode: str, gpus: list[str]
           ) -> dict[str, Any]:
    return {
        "file": {"file": {"type": "file_input", "files": [file]}},
        "leaderboard": {LEADERBOARD_ACTION: {"type": "static_select",
                                             "selected_option": {"value": board} if board else None}},
        "mode": {"mode": {"type": "static_select", "selected_option": {"value": mode}}},
        "gpu": {"gpu": {"type": "multi_static_select", "selected_options": [{"value": g} for g in gpus]}},
    }


def submission(view: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The view_submission payload Slack sends when the form's Submit is pressed."""
    return {"type": "view_submission", "team": {"id": TEAM, "domain": "test"}, "api_app_id": "A1",
            "token": "legacy", "trigger_id": "trigger.2",
            "user": {"id": USER, "username": "bob", "name": "bob", "team_id": TEAM},
            "view": {**view, "id": "V1", "hash": "h1", "state": {"values": state}}}


async def opened_view(slack: Any, text: str) -> dict[str, Any]:
    status, took = await slack.command(text)
    assert status == 200 and took < 3.0
    await slack.settle()
    [opened] = slack.fake.calls_to("views.open")
    assert opened.params["trigger_id"] == "trigger.1"
    view: dict[str, Any] = json.loads(opened.params["view"]) if isinstance(opened.params["view"], str) \
        else opened.params["view"]
    return view


async def test_submit_without_a_file_opens_a_form_with_the_menus_filled_in(start) -> None:
    slack = await start(runner=InstantRunner(("cpu", "H100")))
    view = await opened_view(slack, "submit ranked identity")
    assert view["callback_id"] == CALLBACK_ID
    assert element(view, "file")["type"] == "file_input"
    assert [o["value"] for o in element(view, "leaderboard")["options"]] == ["identity"]
    assert element(view, "leaderboard")["initial_option"]["value"] == "identity"
    assert element(view, "mode")["initial_option"]["value"] == "ranked"
    assert {o["value"] for o in element(view, "gpu")["options"]} == {"cpu", "H100"}


async def test_a_ranked_submission_through_the_form_runs_end_to_end_on_the_local_runner(start) -> None:
    slack = await start(runner=local_runner())
    view = await opened_view(slack, "submit")
    file = slack.fake.host_file("kernel.py", solution())
    status, took = await slack.interaction(submission(view, values(view, file, "identity", "ranked", ["cpu"])))
    assert status == 200 and took < 3.0
    await slack.fake.wait_for(lambda: slack.fake.shared, timeout=60)
    await slack.settle()

    [posted] = [c for c in slack.fake.calls_to("chat.postMessage") if c.params["channel"] == CHANNEL]
    assert "Submission #1 (ranked) of kernel.py accepted for identity" in block_text(posted.params["blocks"])
    [ts] = [ts for (channel, ts) in slack.fake.messages if channel == CHANNEL]
    updates = [c for c in slack.fake.calls_to("chat.update") if c.params["ts"] == ts]
    assert len(updates) >= 2  # progress, then the report
    final = block_text(slack.fake.messages[(CHANNEL, ts)]["blocks"])
    assert "✅" in final and "rank 1 on cpu" in final and "by user U2" in final
    assert {(f["channel"], f["thread_ts"]) for f in slack.fake.shared} == {(CHANNEL, ts)}
    assert "submission-1-benchmarks-on-cpu.txt" in {f["filename"] for f in slack.fake.shared}


async def test_choosing_a_leaderboard_narrows_the_gpu_menu(start) -> None:
    slack = await start(runner=InstantRunner(("cpu", "H100")))
    view = await opened_view(slack, "submit")
    state = values(view, slack.fake.host_file("k.py", solution()), "identity", "test", [])
    payload = {"type": "block_actions", "team": {"id": TEAM}, "user": {"id": USER, "team_id": TEAM},
               "api_app_id": "A1", "token": "legacy", "trigger_id": "trigger.3",
               "container": {"type": "view", "view_id": "V1"},
               "view": {**view, "id": "V1", "hash": "h1", "state": {"values": state}},
               "actions": [{"type": "static_select", "action_id": LEADERBOARD_ACTION, "block_id": "leaderboard",
                            "selected_option": {"value": "identity"}, "action_ts": "1700000000.1"}]}
    await slack.interaction(payload)
    await slack.settle()
    [update] = slack.fake.calls_to("views.update")
    new_view = json.loads(update.params["view"]) if isinstance(update.params["view"], str) else update.params["view"]
    assert update.params["view_id"] == "V1" and update.params["hash"] == "h1"
    assert element(new_view, "leaderboard")["initial_option"]["value"] == "identity"
    assert {o["value"] for o in element(new_view, "gpu")["options"]} == {"cpu", "H100"}


async def test_a_binary_file_in_the_form_is_refused_privately(start) -> None:
    slack = await start()
    view = await opened_view(slack, "submit")
    file = slack.fake.host_file("kernel.py", b"\x00\x01\x02", mimetype="application/octet-stream")
    await slack.interaction(submission(view, values(view, file, "identity", "ranked", [])))
    await slack.settle()
    [ephemeral] = slack.fake.calls_to("chat.postEphemeral")
    assert ephemeral.params["channel"] == CHANNEL and ephemeral.params["user"] == USER
    assert "kernel.py is not a text file" in block_text(ephemeral.params["blocks"])
    assert slack.fake.calls_to("chat.postMessage") == []
