"""Charts on Slack, uploaded with files_upload_v2 into the answer's thread: `show`'s ranking and a
ranked result's history against the leader; without matplotlib neither, the rest unchanged."""

from __future__ import annotations

import io
import sys

import pytest
from matplotlib.image import imread

from kernelcup.core.charts import drawing
from tests.slack.conftest import CHANNEL, DM, file_message, posts_in, solution
from tests.slack.fake_slack import FakeSlack, block_text

PNG = b"\x89PNG\r\n\x1a\n"


async def _ranked(slack) -> None:
    await slack.event(file_message("submit ranked identity", slack.fake.host_file("k.py", solution())))
    await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.update"))
    await slack.settle()


def _pngs(fake: FakeSlack) -> dict[str, dict[str, object]]:
    return {str(f["filename"]): f for f in fake.shared if str(f["filename"]).endswith(".png")}


async def test_a_ranked_result_uploads_its_history_into_the_thread(start) -> None:
    slack = await start()
    await _ranked(slack)
    history = _pngs(slack.fake)["submission-1-cpu-history.png"]
    [ts] = [ts for (channel, ts) in slack.fake.messages if channel == DM]
    assert (history["channel"], history["thread_ts"]) == (DM, ts)
    content = history["content"]
    assert isinstance(content, bytes) and content.startswith(PNG)
    assert imread(io.BytesIO(content)).shape[1] == 800


async def test_show_uploads_the_ranking_into_its_thread(start) -> None:
    slack = await start()
    await _ranked(slack)
    await slack.command("show identity")
    await slack.fake.wait_for(lambda: "identity-cpu-ranking.png" in _pngs(slack.fake))
    ranking = _pngs(slack.fake)["identity-cpu-ranking.png"]
    [shown] = posts_in(slack.fake, CHANNEL)
    assert "identity" in block_text(shown.params["blocks"])
    assert ranking["channel"] == CHANNEL and ranking["thread_ts"] is not None
    content = ranking["content"]
    assert isinstance(content, bytes) and content.startswith(PNG)
    height, width, _ = imread(io.BytesIO(content)).shape
    assert width == 800 and height >= 150


async def test_without_matplotlib_show_uploads_nothing(start, monkeypatch: pytest.MonkeyPatch) -> None:
    slack = await start()
    await _ranked(slack)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(drawing, "_said", type(drawing._said)())
    before = len(slack.fake.shared)
    await slack.command("show identity")
    await slack.fake.wait_for(lambda: posts_in(slack.fake, CHANNEL))
    await slack.settle()
    assert len(slack.fake.shared) == before
    assert "1" in block_text(posts_in(slack.fake, CHANNEL)[0].params["blocks"])
    assert drawing._said.is_set()
