"""A hostile file name submitted on Discord (SECURITY.md, *The bot's own surfaces*): through
discord.py and the fake Discord, every message, edit, thread and file the bot sends shows the
name cut to its last part, without control or bidirectional characters. The API's and pages'
side, and the rule itself: ``tests/web/test_file_names.py``."""

from __future__ import annotations

from typing import Any

import pytest

from kernelcup.adapters.discord.adapter import DiscordAdapter
from tests.discord.conftest import SOLUTION, Send, final_edit, original_edit, settled
from tests.discord.fake_discord import FakeDiscord, slash
from tests.web.test_file_names import NAMES, PATH_PARTS, hidden_characters


def _strings(value: Any) -> list[str]:
    """Every string in a request's JSON, decoded (JSON escapes control characters)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for key, item in value.items() for s in (*_strings(key), *_strings(item))]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


@pytest.mark.parametrize(("uploaded", "shown"), NAMES)
async def test_discord_shows_a_hostile_file_name_cut_to_its_name(
    adapter: DiscordAdapter, fake: FakeDiscord, send: Send, uploaded: str, shown: str
) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, mode="test", gpu="cpu")
    for attachment in payload["data"]["resolved"]["attachments"].values():
        attachment["filename"] = uploaded  # the name as Discord hands it over; the CDN link stays valid
    send(payload)
    await final_edit(fake)
    await settled(adapter)
    mine = slash(fake, "leaderboard", "mine")
    send(mine)
    looked_up = slash(fake, "leaderboard", "get-submission", id=1)
    send(looked_up)
    await fake.wait_for(lambda c: c.status == 200 and looked_up["token"] in c.path)
    await fake.wait_for(lambda c: c.status == 200 and mine["token"] in c.path)

    sent = [c for c in fake.calls if c.method in ("POST", "PATCH") and not c.path.startswith("/cdn/")]
    texts = [s for call in sent for s in (*_strings(call.json), *call.files)]
    assert any(shown in text for text in texts), texts
    for text in texts:
        assert not hidden_characters(text), (hidden_characters(text), text)
        assert not [part for part in PATH_PARTS if part in text], text


async def test_a_refusal_on_discord_names_a_hostile_file_cut_to_its_name(
    adapter: DiscordAdapter, fake: FakeDiscord, send: Send
) -> None:
    uploaded, shown = NAMES[0][0] + "\u202e", "evil.py"
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, mode="test", gpu="cpu")
    for attachment in payload["data"]["resolved"]["attachments"].values():
        attachment.update(filename=uploaded, size=2 * 2**20)  # over the 1 MiB limit: refused before the download
    send(payload)
    refusal = await original_edit(fake, payload)
    texts = _strings(refusal.json)
    assert any(f"{shown} is 2048 KiB" in text for text in texts), texts
    for text in texts:
        assert not hidden_characters(text) and not [part for part in PATH_PARTS if part in text], text
