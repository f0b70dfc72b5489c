"""Charts on Discord: `/leaderboard show` sends the ranking as a PNG with its embed, and a ranked
result posts its history against the leader beside the details; without matplotlib neither."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest
from matplotlib.image import imread

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.charts import drawing
from kernelcup.core.messages import Actor, Attachment, Request
from tests.discord.conftest import SOLUTION, Send, callback, final_edit, settled, submit
from tests.discord.fake_discord import FakeDiscord, embeds_of, slash

PNG = b"\x89PNG\r\n\x1a\n"
RANKING = "identity-cpu-ranking.png"


async def _ranked_by(app: Kernelcup, identity: str, name: str) -> None:
    reply = await app.handle(Request(Actor(identity, name), "submit", {"mode": "ranked", "gpu": ["cpu"]},
                                     [Attachment("kernel.py", SOLUTION)]))
    assert reply.submission_id is not None, reply.text()
    [_ async for _ in app.follow(reply.submission_id)]


async def _show(fake: FakeDiscord, send: Send) -> tuple[dict[str, bytes], list[dict[str, Any]]]:
    payload = slash(fake, "leaderboard", "show", leaderboard="identity")
    send(payload)
    shown = await callback(fake, payload)
    return shown.files, embeds_of(shown)


async def test_show_sends_the_ranking_as_a_png_shown_in_its_embed(adapter: DiscordAdapter, app: Kernelcup,
                                                                  fake: FakeDiscord, send: Send) -> None:
    await _ranked_by(app, "discord:700", "racer")
    files, embeds = await _show(fake, send)
    assert list(files) == [RANKING]
    assert files[RANKING].startswith(PNG)
    height, width, _ = imread(io.BytesIO(files[RANKING])).shape
    assert width == 800 and height >= 150
    assert embeds[0]["image"]["url"] == f"attachment://{RANKING}"


async def test_a_ranked_result_posts_its_history_chart_with_the_details(adapter: DiscordAdapter, fake: FakeDiscord,
                                                                        send: Send) -> None:
    _, message_id = await submit(fake, send, mode="ranked")
    await final_edit(fake, message_id)
    await settled(adapter)
    sent = {name: content for call in fake.calls if call.method == "POST" and "/messages" in call.path
            for name, content in call.files.items()}
    history = sent["submission-1-cpu-history.png"]
    assert history.startswith(PNG) and imread(io.BytesIO(history)).shape[1] == 800


async def test_without_matplotlib_show_is_text_only(adapter: DiscordAdapter, app: Kernelcup, fake: FakeDiscord,
                                                    send: Send, monkeypatch: pytest.MonkeyPatch) -> None:
    await _ranked_by(app, "discord:700", "racer")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(drawing, "_said", type(drawing._said)())
    files, embeds = await _show(fake, send)
    assert files == {} and "image" not in embeds[0]
    assert "racer" in str(embeds[0]["description"])
    assert drawing._said.is_set()  # the one log line was written
