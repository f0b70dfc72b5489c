"""The /leaderboard command mirrors the core's registry: help, errors, roles, files."""

from __future__ import annotations

from kernelcup.core.commands.catalog import commands
from tests.slack.conftest import ADMIN, CHANNEL, USER
from tests.slack.fake_slack import block_text


async def test_an_unknown_subcommand_shows_the_error_and_help_only_to_the_user(start) -> None:
    slack = await start()
    await slack.command("frobnicate now")
    await slack.settle()
    [response] = slack.fake.responses
    text = block_text(response["blocks"])
    assert response["response_type"] == "ephemeral"
    assert "There is no command 'frobnicate'" in text
    assert "submit" in text and "get-submission" in text and "share your file with me" in text
    assert slack.fake.calls_to("chat.postMessage") == []


async def test_help_lists_every_command_a_user_may_run_from_the_registry(start) -> None:
    slack = await start()
    await slack.command("help")
    await slack.settle()
    text = block_text(slack.fake.responses[0]["blocks"])
    for command in commands():
        assert (command.name in text) == (command.group == "leaderboard" and command.role.value == "user")


async def test_an_admin_command_from_a_user_is_refused_privately(start) -> None:
    slack = await start()
    await slack.command("pause", user=USER)
    await slack.settle()
    [response] = slack.fake.responses
    assert response["response_type"] == "ephemeral"
    assert "Only admins may use pause." in block_text(response["blocks"])


async def test_a_member_of_the_configured_user_group_is_an_admin(start) -> None:
    slack = await start()
    slack.fake.usergroups = [{"id": "SADMINS", "handle": "organizers", "users": [ADMIN]}]
    await slack.command("admin pause", user=ADMIN)
    await slack.settle()
    [posted] = slack.fake.calls_to("chat.postMessage")
    assert posted.params["channel"] == CHANNEL
    assert "Submissions are paused" in block_text(posted.params["blocks"])


async def test_a_mention_names_a_user_for_admin_commands(start) -> None:
    slack = await start()
    slack.fake.usergroups = [{"id": "SADMINS", "users": [ADMIN]}]
    await slack.command("mine", user=USER)  # U2 becomes known to the core
    await slack.settle()
    await slack.command("ban <@U2|bob>", user=ADMIN)
    await slack.settle()
    [posted] = slack.fake.calls_to("chat.postMessage")
    assert "(slack:T1/U2) is banned" in block_text(posted.params["blocks"])


async def test_a_user_error_is_ephemeral_with_its_hint(start) -> None:
    slack = await start()
    await slack.command("show nosuchboard")
    await slack.settle()
    [response] = slack.fake.responses
    assert response["response_type"] == "ephemeral"
    assert "nosuchboard" in block_text(response["blocks"])


async def test_reply_files_go_to_the_thread_of_the_reply(start) -> None:
    slack = await start()
    await slack.command("task identity")
    await slack.settle()
    [posted] = slack.fake.calls_to("chat.postMessage")
    ts = next(ts for (channel, ts) in slack.fake.messages if channel == CHANNEL)
    assert "Copy a vector" in block_text(posted.params["blocks"])
    names = {f["filename"] for f in slack.fake.shared}
    assert {"task.py", "reference.py"} <= names
    assert all(f["thread_ts"] == ts and f["channel"] == CHANNEL for f in slack.fake.shared)
    assert all(upload.get("content") for upload in slack.fake.uploads.values())


async def test_a_reply_in_a_channel_without_the_bot_goes_to_the_users_dm(start) -> None:
    slack = await start()
    slack.fake.not_in.add(CHANNEL)
    await slack.command("list")
    await slack.settle()
    channels = [c.params["channel"] for c in slack.fake.calls_to("chat.postMessage")]
    assert channels == [CHANNEL, f"D{USER}"]


async def test_create_explains_how_to_share_the_files(start) -> None:
    slack = await start()
    await slack.command("create")
    await slack.settle()
    assert "share the files with me" in slack.fake.responses[0]["text"]
