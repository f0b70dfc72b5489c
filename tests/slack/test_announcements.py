"""Announcements reach the Slack channel that config names for the leaderboard."""

from __future__ import annotations

from kernelcup.core.messages import File, Reply, Table, Text
from kernelcup.core.scheduling.announcements import Announcement, Occasion
from tests.slack.conftest import DM, file_message, posts_in, solution
from tests.slack.fake_slack import block_text


async def test_an_announcement_is_block_kit_in_the_configured_channel_with_files_in_its_thread(start) -> None:
    slack = await start()
    reply = Reply([Text("identity has closed", style="title"),
                   Table(("rank", "user"), (("1", "bob"),), title="Final standings"),
                   File("standings.csv", b"rank,user\n1,bob\n", "standings")])
    delivered = await slack.app.announcements.publish(Announcement("identity", Occasion.CLOSED, reply))
    assert delivered == 1
    [posted] = posts_in(slack.fake, "CANNOUNCE")
    text = block_text(posted.params["blocks"])
    assert "*identity has closed*" in text and "Final standings" in text and "1     bob" in text
    [(_, ts)] = slack.fake.messages
    [shared] = slack.fake.shared
    assert (shared["filename"], shared["channel"], shared["thread_ts"]) == ("standings.csv", "CANNOUNCE", ts)


async def test_a_new_first_place_is_announced_in_slack(start) -> None:
    slack = await start()
    await slack.event(file_message("submit ranked identity", slack.fake.host_file("k.py", solution())))
    [announced] = await slack.fake.wait_for(lambda: posts_in(slack.fake, "CANNOUNCE"))
    await slack.fake.wait_for(lambda: posts_in(slack.fake, DM))
    await slack.settle()
    assert "identity" in block_text(announced.params["blocks"])
