"""Replies as Discord messages: within Discord's limits, and never cut."""

from __future__ import annotations

from kernelcup.adapters.discord.render import (
    FILES_PER_MESSAGE,
    MESSAGE_CHARS,
    RED,
    detail_messages,
    render_reply,
)
from kernelcup.core.messages import Block, Code, File, Reply, Table, Text


def long_table(rows: int) -> Table:
    return Table(("rank", "user", "score"), tuple((str(i), f"user{i}", f"{i}.0 ms") for i in range(rows)),
                 title="H100")


def test_a_long_table_is_split_between_rows_with_the_header_on_every_page() -> None:
    rendered = render_reply(Reply([long_table(200)]), page_chars=1000)
    assert len(rendered.pages) > 1
    assert all(len(page.text) <= 1000 for page in rendered.pages)
    assert all("rank  user" in page.text for page in rendered.pages)
    shown = "".join(page.text for page in rendered.pages)
    assert all(f"user{i} " in shown for i in range(200))  # every row is on some page


def test_text_too_long_for_a_page_becomes_a_file_not_a_cut() -> None:
    text = "x" * 10_000
    rendered = render_reply(Reply([Text(text)]), page_chars=3800)
    assert len(rendered.pages) == 1 and "attached as reply-1.txt" in rendered.pages[0].text
    assert rendered.files[0].content.decode() == text


def test_a_refusal_is_red_and_keeps_its_hint() -> None:
    page = render_reply(Reply.error("No such leaderboard.", "Try /leaderboard list.")).pages[0]
    assert page.colour == RED and "Try /leaderboard list." in page.text


def test_detail_messages_respect_discord_limits_and_lose_nothing() -> None:
    files = [File(f"log{i}.txt", b"x" * 10) for i in range(13)]
    blocks: list[Block] = [Text("summary"), long_table(300), Code("print('hi')\n" * 400, "python"), *files]
    messages = detail_messages(blocks, file_prefix="submission-7")
    assert all(len(m.content) <= MESSAGE_CHARS for m in messages)
    assert all(len(m.files) <= FILES_PER_MESSAGE for m in messages)
    names = [f.name for m in messages for f in m.files]
    assert {f"log{i}.txt" for i in range(13)} <= set(names)
    assert "submission-7-h100.txt" in names  # the long table, whole, as a file
    table_file = next(f for m in messages for f in m.files if f.name == "submission-7-h100.txt")
    assert b"user299" in table_file.content


def test_a_file_too_big_for_discord_is_named_not_dropped_silently() -> None:
    messages = detail_messages([File("profile.txt", b"x" * 2048)], file_limit=1024)
    assert "profile.txt" in messages[0].content and not messages[0].files
