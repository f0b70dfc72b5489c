"""A submission on Discord, end to end: deferred at once, the file fetched from Discord's CDN,
live edits while the real harness runs on the CPU, a result embed, and a thread of details."""

from __future__ import annotations

import pytest

from kernelcup.adapters.discord.render import GREEN
from kernelcup.core.config import Settings
from kernelcup.runners.local import LocalRunner
from tests.discord.conftest import ROOT, Send
from tests.discord.fake_discord import (
    ALICE,
    APP_ID,
    EPHEMERAL,
    SUBMIT_CHANNEL,
    FakeDiscord,
    description_of,
    embeds_of,
    slash,
)

KERNEL = (ROOT / "leaderboards" / "identity" / "solutions" / "pytorch.py").read_text().replace(
    "    x, output = data\n", "    x, output = data\n    print('hello from the kernel')\n")


@pytest.fixture
def runner(settings: Settings) -> LocalRunner:
    return LocalRunner(settings, gpu="cpu")


@pytest.mark.slow
async def test_a_ranked_submission_runs_end_to_end(adapter: object, fake: FakeDiscord, send: Send) -> None:
    payload = slash(fake, "leaderboard", "submit", files={"file": ("kernel.py", KERNEL.encode())}, mode="ranked")
    send(payload)
    token = payload["token"]
    webhook = f"/webhooks/{APP_ID}/{token}"

    final = (await fake.wait_for(
        lambda c: c.method == "PATCH" and c.path.startswith(webhook + "/messages/")
        and any(e.get("color") == GREEN for e in embeds_of(c)), timeout=60))[0]

    first = fake.calls.index(next(c for c in fake.calls if c.path.endswith("/callback")))
    callback = fake.calls[first]
    assert callback.json == {"type": 5, "data": {"flags": EPHEMERAL}}  # deferred at once, privately
    download = next(i for i, c in enumerate(fake.calls) if c.path.startswith("/cdn/attachments/"))
    assert download > first
    public = next(c for c in fake.calls if c.method == "POST" and c.path == webhook)
    assert not (public.json or {}).get("flags")
    message_id = int(public.response["id"])
    edits = fake.find("PATCH", f"{webhook}/messages/{message_id}")
    assert any("testing" in description_of(e) or "benchmarking" in description_of(e) for e in edits[:-1])
    assert final is edits[-1]
    assert "rank 1 on cpu" in description_of(final)

    thread_call = fake.find("POST", f"/channels/{SUBMIT_CHANNEL}/threads")[0]
    thread_id = next(iter(fake.threads))
    assert thread_call.json is not None and thread_call.json["type"] == 12  # private to the submitter
    assert (thread_id, ALICE) in fake.thread_members
    assert f"<#{thread_id}>" in embeds_of(final)[0]["fields"][0]["value"]
    details = fake.find("POST", f"/channels/{thread_id}/messages")
    assert any("Benchmarks on cpu" in (c.json or {}).get("content", "") for c in details)
    logs = [name for c in details for name in c.files]
    assert "submission-1-cpu-stdout.txt" in logs
    stdout = next(c.files["submission-1-cpu-stdout.txt"] for c in details if "submission-1-cpu-stdout.txt" in c.files)
    assert b"hello from the kernel" in stdout
