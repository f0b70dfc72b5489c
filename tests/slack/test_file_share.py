"""Submitting by sharing a file with the bot: the message that carries it says what to do."""

from __future__ import annotations

import socket

import pytest

from tests.slack.conftest import DM, file_message, local_runner, solution
from tests.slack.fake_slack import BOT_USER, FakeSlack, block_text


def ephemeral_text(fake: FakeSlack) -> str:
    return "\n".join(block_text(c.params["blocks"]) for c in fake.calls_to("chat.postEphemeral"))


async def test_a_ranked_file_in_a_dm_runs_end_to_end_on_the_local_runner(start) -> None:
    slack = await start(runner=local_runner())
    status, took = await slack.event(file_message("submit ranked identity", slack.fake.host_file("k.py", solution())))
    assert status == 200 and took < 3.0
    await slack.fake.wait_for(lambda: slack.fake.shared, timeout=60)
    await slack.settle()

    [posted] = [c for c in slack.fake.calls_to("chat.postMessage") if c.params["channel"] == DM]
    assert "Submission #1 (ranked) of k.py accepted for identity" in block_text(posted.params["blocks"])
    updates = [block_text(c.params["blocks"]) for c in slack.fake.calls_to("chat.update")]
    assert any("testing" in u or "benchmarking" in u for u in updates[:-1]), updates  # live progress
    assert "✅" in updates[-1] and "rank 1 on cpu" in updates[-1]
    [ts] = [ts for (channel, ts) in slack.fake.messages if channel == DM]
    assert [c.params["ts"] for c in slack.fake.calls_to("chat.update")] == [ts] * len(updates)

    # Per-case timings as a file in the message's thread, through files_upload_v2's three steps.
    [timings] = [f for f in slack.fake.shared if f["filename"] == "submission-1-benchmarks-on-cpu.txt"]
    assert (timings["channel"], timings["thread_ts"]) == (DM, ts)
    assert b"size=4096" in timings["content"]
    assert len(slack.fake.calls_to("files.getUploadURLExternal")) == len(slack.fake.shared)
    assert len(slack.fake.calls_to("files.completeUploadExternal")) == 1


async def test_popcorn_lines_in_the_message_choose_leaderboard_and_mode(start) -> None:
    slack = await start()
    text = "#!POPCORN leaderboard identity\n#!POPCORN gpus cpu\n#!POPCORN mode benchmark"
    await slack.event(file_message(text, slack.fake.host_file("k.py", solution())))
    await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    await slack.settle()
    first = block_text(slack.fake.calls_to("chat.postMessage")[0].params["blocks"])
    assert "Submission #1 (benchmark) of k.py accepted for identity" in first


async def test_a_file_without_a_message_is_tested_on_its_popcorn_leaderboard(start) -> None:
    slack = await start()
    source = b"#!POPCORN leaderboard identity\n" + solution()
    await slack.event(file_message("", slack.fake.host_file("k.py", source)))
    await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    await slack.settle()
    [posted] = slack.fake.calls_to("chat.postMessage")
    assert "Submission #1 (test) of k.py accepted" in block_text(posted.params["blocks"])


async def test_a_file_mentioning_the_bot_in_a_channel_is_submitted(start) -> None:
    slack = await start()
    event = file_message(f"<@{BOT_USER}> submit test identity", slack.fake.host_file("k.py", solution()),
                         channel="C7", channel_type="channel")
    await slack.event(event)
    await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    assert slack.fake.calls_to("chat.postMessage")[0].params["channel"] == "C7"


async def test_files_in_a_channel_not_meant_for_the_bot_are_left_alone(start) -> None:
    slack = await start()
    event = file_message("here are my holiday photos", slack.fake.host_file("k.py", solution()),
                         channel="C7", channel_type="channel")
    await slack.event(event)
    await slack.settle()
    assert [c.method for c in slack.fake.calls if c.method != "auth.test"] == []
    assert slack.fake.downloads == []


async def test_a_file_too_big_is_refused_without_downloading_it(start) -> None:
    slack = await start()
    await slack.event(file_message("submit ranked identity", slack.fake.host_file("k.py", b"#" * (2 * 2**20))))
    await slack.settle()
    assert "k.py is 2048 KiB; the limit is 1024 KiB." in ephemeral_text(slack.fake)
    assert slack.fake.downloads == [] and slack.fake.calls_to("chat.postMessage") == []


async def test_a_binary_file_is_refused_as_not_text(start) -> None:
    slack = await start()
    binary = slack.fake.host_file("k.py", b"\x7fELF\x02\x01\x00\x00binary", mimetype="application/octet-stream")
    await slack.event(file_message("submit ranked identity", binary))
    await slack.settle()
    assert "k.py is not a text file" in ephemeral_text(slack.fake)
    assert slack.fake.calls_to("chat.postMessage") == []


async def test_an_image_is_refused_before_download(start) -> None:
    slack = await start()
    image = slack.fake.host_file("screenshot.png", b"\x89PNG\r\n", mimetype="image/png")
    await slack.event(file_message("submit ranked identity", image))
    await slack.settle()
    assert "screenshot.png is a PNG file, not source code." in ephemeral_text(slack.fake)
    assert slack.fake.downloads == []


async def test_a_download_without_files_read_scope_explains_the_fix(start) -> None:
    slack = await start()
    unreadable = {**slack.fake.host_file("k.py", solution()), "url_private_download": f"{slack.fake.base}/files/gone"}
    await slack.event(file_message("submit ranked identity", unreadable))
    await slack.settle()
    assert "files:read" in ephemeral_text(slack.fake)


async def test_a_submit_command_in_a_dm_without_a_file_asks_for_it(start) -> None:
    slack = await start()
    await slack.event(file_message("submit ranked identity"))
    await slack.settle()
    assert "Attach the file to submit." in ephemeral_text(slack.fake)


async def test_a_gpu_the_leaderboard_does_not_run_on_is_refused_privately(start) -> None:
    slack = await start()
    await slack.event(file_message("submit test identity --gpu A999", slack.fake.host_file("k.py", solution())))
    await slack.settle()
    assert "Leaderboard identity does not run on A999." in ephemeral_text(slack.fake)


async def test_slack_sending_the_same_event_twice_submits_once(start) -> None:
    slack = await start()
    event = file_message("submit test identity", slack.fake.host_file("k.py", solution()))
    await slack.event(event)
    await slack.event(event)  # a retry: Slack thought the first was not acknowledged in time
    await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    await slack.settle()
    assert len(slack.fake.calls_to("chat.postMessage")) == 1


async def test_chatter_in_a_dm_gets_a_hint(start) -> None:
    slack = await start()
    await slack.event(file_message("hello bot"))
    await slack.settle()
    assert "share your kernel" in ephemeral_text(slack.fake)


async def test_a_command_typed_in_a_dm_is_run(start) -> None:
    slack = await start()
    await slack.event(file_message("list"))
    [posted] = await slack.fake.wait_for(lambda: slack.fake.calls_to("chat.postMessage"))
    assert posted.params["channel"] == DM and "identity" in block_text(posted.params["blocks"])


async def test_the_bot_token_goes_to_no_host_but_slacks(start) -> None:
    """A signed payload whose file link points elsewhere: refused before any request is made."""

    elsewhere = socket.create_server(("127.0.0.1", 0))
    elsewhere.setblocking(False)
    try:
        slack = await start()
        port = elsewhere.getsockname()[1]
        planted = {**slack.fake.host_file("k.py", solution()),
                   "url_private_download": f"http://127.0.0.1:{port}/steal", "url_private": f"http://127.0.0.1:{port}/x"}
        await slack.event(file_message("submit ranked identity", planted))
        await slack.settle()
        assert "does not point at Slack" in ephemeral_text(slack.fake)
        with pytest.raises(BlockingIOError):
            elsewhere.accept()  # nobody ever connected, so no token was sent
    finally:
        elsewhere.close()
