"""A hostile file name shared with the bot on Slack (SECURITY.md, *The bot's own surfaces*):
through slack-bolt and the fake Slack, every message, update, answer and uploaded file the bot
sends shows the name cut to its last part, without control or bidirectional characters. The
API's and pages' side, and the rule itself: ``tests/web/test_file_names.py``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.slack.conftest import Slack, file_message, solution
from tests.slack.fake_slack import FakeSlack
from tests.web.test_file_names import NAMES, PATH_PARTS, hidden_characters


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (*_strings(key), *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _sent(fake: FakeSlack) -> list[str]:
    """Every string the bot sent Slack: Web API calls (blocks parsed), answers, uploaded files' names."""
    texts = _strings([call.params for call in fake.calls]) + _strings(fake.responses)
    texts += [str(upload["filename"]) for upload in fake.uploads.values()]
    return texts


@pytest.mark.parametrize(("uploaded", "shown"), NAMES)
async def test_slack_shows_a_hostile_file_name_cut_to_its_name(start: Any, uploaded: str, shown: str) -> None:
    slack: Slack = await start()
    hosted = {**slack.fake.host_file("kernel.py", solution()), "name": uploaded, "title": uploaded}
    await slack.event(file_message("submit test identity", hosted))
    await slack.fake.wait_for(lambda: any("✅" in s for s in _strings([c.params for c in
                                                                       slack.fake.calls_to("chat.update")])))
    await slack.settle()
    await slack.command("mine")
    await slack.command("get-submission 1")
    await slack.fake.wait_for(lambda: len(slack.fake.responses) >= 2)
    await slack.settle()

    texts = _sent(slack.fake)
    assert any(shown in text for text in texts), texts
    for text in texts:
        assert not hidden_characters(text), (hidden_characters(text), text)
        assert not [part for part in PATH_PARTS if part in text], text


async def test_a_refusal_on_slack_names_a_hostile_file_cut_to_its_name(start: Any) -> None:
    slack: Slack = await start()
    uploaded, shown = NAMES[0][0] + "\u202e", "evil.py"
    hosted = {**slack.fake.host_file("kernel.py", b"#" * (2 * 2**20)), "name": uploaded, "title": uploaded}
    await slack.event(file_message("submit test identity", hosted))
    await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postEphemeral") or slack.fake.responses)
    await slack.settle()
    texts = _sent(slack.fake)
    assert any(f"{shown} is 2048 KiB" in text for text in texts), texts
    for text in texts:
        assert not hidden_characters(text) and not [part for part in PATH_PARTS if part in text], text
