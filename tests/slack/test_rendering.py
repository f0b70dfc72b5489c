"""Slack's text in, Block Kit out: the pure parts of the adapter."""

from __future__ import annotations

from kernelcup.adapters.slack.blocks import render
from kernelcup.adapters.slack.parsing import file_comment, slash_command
from kernelcup.core.messages import Code, File, Reply, Table, Text


def test_the_second_word_of_submit_is_the_leaderboard_since_slack_names_no_file() -> None:
    assert slash_command("submit ranked vectoradd --gpu H100", "T1") == (
        "submit", {"mode": "ranked", "leaderboard": "vectoradd", "gpu": ["H100"]})


def test_admin_words_and_mentions_become_the_core_command_and_identity() -> None:
    assert slash_command("admin ban <@U42|eve>", "T1") == ("ban", {"user": "slack:T1/U42"})


def test_a_dash_a_phone_made_of_two_hyphens_still_is_an_option() -> None:
    assert slash_command("show identity —gpu cpu", "T1")[1]["gpu"] == "cpu"


def test_a_file_comment_mentioning_the_bot_reads_as_the_command_after_it() -> None:
    assert file_comment("<@UBOT> submit benchmark identity", "T1", "UBOT") == (
        "submit", {"mode": "benchmark", "leaderboard": "identity"})


def test_popcorn_lines_of_a_comment_fill_what_the_command_leaves_out() -> None:
    text = "submit ranked\n#!POPCORN leaderboard identity\n#!POPCORN gpus cpu, H100"
    assert file_comment(text, "T1", None) == (
        "submit", {"mode": "ranked", "leaderboard": "identity", "gpu": ["cpu", "H100"]})


def test_text_is_escaped_for_mrkdwn() -> None:
    message = render(Reply([Text("a <b> & c")]))
    assert message.blocks[0]["text"]["text"] == "a &lt;b&gt; &amp; c"


def test_a_table_too_long_for_a_message_becomes_a_file() -> None:
    rows = tuple((str(i), "x" * 60) for i in range(100))
    message = render(Reply([Text("Ranking", style="title"), Table(("rank", "user"), rows, title="H100")]))
    assert [f.name for f in message.files] == ["h100.txt"]
    assert b"x" * 60 in message.files[0].content
    assert len(message.blocks) == 1


def test_files_and_long_code_go_to_the_thread_never_cut() -> None:
    code = "print(1)\n" * 400
    message = render(Reply([File("log.txt", b"log"), Code(code, "python")]))
    assert {f.name for f in message.files} == {"log.txt", "code.py"}
    assert message.blocks[0]["type"] == "context"  # "2 file(s) in the thread."
