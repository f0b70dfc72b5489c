"""A Reply has one JSON form (kernelcup.core.wire): the API answers with it, the remote CLI and the
terminal's hand-off read it back, and nothing is lost on the way."""

from __future__ import annotations

import binascii
import json
import typing

import pytest

from kernelcup.core.messages import (
    Attachment,
    Block,
    Code,
    File,
    Image,
    ProgressBlock,
    Refusal,
    Reply,
    Table,
    Text,
)
from kernelcup.core.wire import (
    attachment_from_wire,
    attachment_to_wire,
    block_from_wire,
    reply_from_wire,
    reply_to_wire,
)

EVERY_BLOCK: list[Block] = [
    Text("hello", "success"),
    Table(("a", "b"), (("1", "2"), ("3", "4")), "t"),
    Code("x = 1", "python"),
    File("log.txt", "plain text, ünïcode".encode(), "the log"),
    File("dump.bin", b"\x00\xffbytes", "bytes that are not UTF-8"),
    Image("chart.png", b"\x89PNG\r\n", "a chart"),
    ProgressBlock(3, "H100", "queued", 0, 5, 2),
    ProgressBlock(4, "cpu", "testing", 1, 5),
]


def crossed(reply: Reply) -> Reply:
    return reply_from_wire(json.loads(json.dumps(reply_to_wire(reply))))


def test_every_kind_of_block_is_in_the_round_trip() -> None:
    assert {type(block) for block in EVERY_BLOCK} == set(typing.get_args(Block))


def test_a_reply_with_every_block_crosses_the_wire_unchanged() -> None:
    reply = Reply(blocks=list(EVERY_BLOCK), ok=False, ephemeral=True, submission_id=7,
                  choices={"gpu": ["H100", "A100"]}, problem=Refusal("rate_limited", 12.5))
    assert crossed(reply) == reply


def test_a_plain_reply_crosses_unchanged_and_carries_its_text() -> None:
    reply = Reply([Text("one"), Code("two")])
    wire = reply_to_wire(reply)
    assert crossed(reply) == reply
    assert wire["text"] == reply.text() and wire["problem"] is None and wire["choices"] is None


def test_text_travels_as_text_and_other_bytes_as_base64() -> None:
    text_file, binary_file = (reply_to_wire(Reply([block]))["blocks"][0] for block in EVERY_BLOCK[3:5])
    assert text_file["text"] == "plain text, ünïcode" and "base64" not in text_file
    assert binary_file["base64"] and "text" not in binary_file


def test_a_block_of_a_kind_this_reader_does_not_know_is_shown_as_its_text() -> None:
    assert block_from_wire({"type": "hologram", "text": "seen anyway"}) == Text("seen anyway")


@pytest.mark.parametrize("content", [b"def custom_kernel(data):\n    return data\n", b"PK\x03\x04\x00\xff"])
def test_an_attachment_crosses_unchanged(content: bytes) -> None:
    attachment = Attachment("kernel.py", content)
    assert attachment_from_wire(json.loads(json.dumps(attachment_to_wire(attachment)))) == attachment


def test_an_attachment_with_broken_base64_is_refused() -> None:
    with pytest.raises(binascii.Error):
        attachment_from_wire({"name": "x.zip", "base64": "not base64!"})
