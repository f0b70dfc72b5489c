"""Discord's interactive pieces: autocomplete, the GPU menu, the create form, the delete
confirmation and page buttons, each driven the way Discord drives them."""

from __future__ import annotations

import io
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kernelcup.adapters.discord.adapter import DiscordAdapter
from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Attachment, Request
from tests.discord.conftest import (
    QUICK_ENOUGH_S,
    SOLUTION,
    GatedRunner,
    Send,
    callback,
    final_edit,
    followup,
    original_edit,
)
from tests.discord.fake_discord import (
    EPHEMERAL,
    ORGANIZER_PERSON,
    FakeDiscord,
    component,
    components_of,
    description_of,
    embeds_of,
    listening,
    modal_submit,
    slash,
)


async def test_leaderboard_names_are_completed_from_the_database(adapter: DiscordAdapter, fake: FakeDiscord,
                                                                 send: Send) -> None:
    payload = slash(fake, "leaderboard", "show", leaderboard="ide", focused="leaderboard")
    send(payload)
    answer = await callback(fake, payload)
    assert answer.json == {"type": 8, "data": {"choices": [{"name": "identity", "value": "identity"}]}}


async def test_gpus_are_completed_for_the_chosen_leaderboard(adapter: DiscordAdapter, fake: FakeDiscord,
                                                             send: Send) -> None:
    payload = slash(fake, "leaderboard", "show", leaderboard="identity", gpu="h", focused="gpu")
    send(payload)
    answer = await callback(fake, payload)
    assert answer.json == {"type": 8, "data": {"choices": [{"name": "H100", "value": "H100"}]}}


async def test_a_gpu_menu_asks_which_gpus_when_the_leaderboard_runs_on_several(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, runner: GatedRunner) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", SOLUTION)}, mode="test")
    send(payload)
    await original_edit(fake, payload)
    menu = fake.original(payload["token"])
    await listening(adapter.client, message_id=int(menu["id"]))
    select = components_of(menu)[0]
    assert menu["flags"] & EPHEMERAL
    assert select["type"] == 3 and sorted(o["value"] for o in select["options"]) == ["H100", "cpu"]

    pick = component(fake, menu, select["custom_id"], values=["H100"])
    send(pick)
    assert (await callback(fake, pick)).json == {"type": 6}  # the menu message is updated later
    public = await followup(fake, pick)
    await final_edit(fake, int(public.response["id"]))
    assert [spec.gpu.name for spec in runner.specs] == ["H100"]
    assert not components_of(fake.original(pick["token"]))  # the menu is gone


def task_zip(leaderboards: Path) -> bytes:
    """The identity task folder as someone would zip it, its shared helper inside."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in (leaderboards / "identity").iterdir():
            text = path.read_text()
            if path.name == "task.yml":
                text = text.replace("../utils.py", "utils.py")
            bundle.writestr(f"copycat/{path.name}", text)
        bundle.writestr("copycat/utils.py", (leaderboards / "utils.py").read_text())
    return buffer.getvalue()


async def test_create_asks_for_its_text_fields_in_a_modal(adapter: DiscordAdapter, fake: FakeDiscord,
                                                          send: Send, leaderboards: Path, app: Kernelcup) -> None:
    payload = slash(fake, "leaderboard", "create", files={"folder": ("copycat.zip", task_zip(leaderboards))},
                    person=ORGANIZER_PERSON)
    send(payload)
    modal = await callback(fake, payload)
    assert modal.json is not None and modal.json["type"] == 9
    asked = [row["component"]["custom_id"] for row in modal.json["data"]["components"]]
    assert asked == ["name", "deadline", "gpu"]
    await listening(adapter.client, modal=modal.json["data"]["custom_id"])

    form = modal_submit(fake, modal.json["data"]["custom_id"], {"name": "copycat", "deadline": "+7d", "gpu": "cpu"},
                        person=ORGANIZER_PERSON)
    send(form)
    created = await followup(fake, form)
    assert "Created leaderboard copycat" in description_of(created)
    assert "copycat" in await app.complete(*_leaderboard_kind(), "copy")


def _leaderboard_kind() -> tuple[Any]:
    from kernelcup.core.commands.registry import Kind

    return (Kind.LEADERBOARD,)


async def test_delete_waits_for_a_confirmation_button(adapter: DiscordAdapter, fake: FakeDiscord, send: Send,
                                                      app: Kernelcup) -> None:
    payload = slash(fake, "leaderboard", "delete", leaderboard="identity", person=ORGANIZER_PERSON)
    send(payload)
    asked = await callback(fake, payload)
    message = fake.original(payload["token"])
    await listening(adapter.client, message_id=int(message["id"]))
    assert asked.json is not None and asked.json["data"]["flags"] == EPHEMERAL
    assert "cannot be undone" in description_of(asked)
    confirm, cancel = components_of(message)
    assert confirm["label"] == "Yes, delete" and cancel["label"] == "Cancel"
    assert await app.complete(*_leaderboard_kind(), "") == ["identity"]  # nothing deleted yet

    click = component(fake, message, confirm["custom_id"], person=ORGANIZER_PERSON)
    send(click)
    done = await followup(fake, click)
    assert "Deleted leaderboard identity" in description_of(done)
    assert await app.complete(*_leaderboard_kind(), "") == []


@pytest.fixture
def discord_section() -> dict[str, Any]:
    return {"submission_channels": [], "edit_interval_s": 0.3, "page_chars": 300,
            "respond_within_s": QUICK_ENOUGH_S}


async def six_ranked_entries(app: Kernelcup) -> None:
    for n in range(6):
        actor = Actor(f"discord:{600 + n}", f"racer{n}")
        reply = await app.handle(Request(actor, "submit", {"mode": "ranked", "gpu": ["cpu"]},
                                         [Attachment("kernel.py", SOLUTION)]))
        assert reply.submission_id is not None
        [_ async for _ in app.follow(reply.submission_id)]


async def test_a_long_ranking_is_paged_with_buttons(adapter: DiscordAdapter, fake: FakeDiscord, send: Send,
                                                    app: Kernelcup) -> None:
    await six_ranked_entries(app)
    payload = slash(fake, "leaderboard", "show", leaderboard="identity")
    send(payload)
    shown = await callback(fake, payload)
    message = fake.original(payload["token"])
    await listening(adapter.client, message_id=int(message["id"]))
    back, counter, forward = components_of(message)
    assert counter["label"].startswith("1/") and back["disabled"] and not forward.get("disabled")
    first_page = description_of(shown)

    turn = component(fake, message, forward["custom_id"])
    send(turn)
    turned = await callback(fake, turn)
    assert turned.json is not None and turned.json["type"] == 7
    assert embeds_of(turned)[0]["description"] != first_page
    assert components_of(turned.json["data"])[1]["label"].startswith("2/")


async def test_a_slow_answer_is_deferred_and_its_pages_follow_with_working_buttons(
        adapter: DiscordAdapter, fake: FakeDiscord, send: Send, app: Kernelcup) -> None:
    await six_ranked_entries(app)
    adapter.conversations.config = replace(adapter.conversations.config, respond_within_s=0.0)
    payload = slash(fake, "leaderboard", "show", leaderboard="identity")
    send(payload)
    deferred = await callback(fake, payload)
    assert deferred.json == {"type": 5, "data": {"flags": EPHEMERAL}}
    posted = await followup(fake, payload)
    message = posted.response
    assert isinstance(message, dict)
    await listening(adapter.client, message_id=int(message["id"]))
    assert "posted in the channel" in (await original_edit(fake, payload)).json["content"]  # type: ignore[index]
    back, counter, forward = components_of(message)
    assert counter["label"].startswith("1/") and back["disabled"] and not forward.get("disabled")

    turn = component(fake, message, forward["custom_id"])
    send(turn)
    turned = await callback(fake, turn)
    assert turned.json is not None and turned.json["type"] == 7
    assert embeds_of(turned)[0]["description"] != description_of(posted)
    assert components_of(turned.json["data"])[1]["label"].startswith("2/")
