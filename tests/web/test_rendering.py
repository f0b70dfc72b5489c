"""The pieces the pages and the remote CLI are drawn with: descriptions, charts, replies on the wire."""

from __future__ import annotations

from datetime import timedelta

import httpx

from kernelcup.adapters.terminal.remote import reply_of
from kernelcup.adapters.web.charts import Point, Series, score_chart
from kernelcup.adapters.web.markdown import render
from kernelcup.adapters.web.replies import reply_out, status_of
from kernelcup.core.messages import Code, File, Image, Problem, ProgressBlock, Reply, Table, Text
from tests.web.conftest import NOW


def test_a_description_cannot_inject_html() -> None:
    html = str(render('<script>alert(1)</script> and [x](javascript:alert(1)) `a<b`'))
    assert "<script>" not in html and "javascript:" not in str(html.split("href")[1:])
    assert "<code>a&lt;b</code>" in html


def test_a_description_keeps_lists_code_bold_and_http_links() -> None:
    html = str(render("**Input** `data`:\n- `input`: a tensor\n- `output`: another\n\n[docs](https://example.org/x)"))
    assert "<strong>Input</strong> <code>data</code>:" in html
    assert html.count("<li>") == 2
    assert '<a href="https://example.org/x" rel="nofollow noopener">docs</a>' in html


def test_a_chart_draws_a_dot_per_point_with_its_label() -> None:
    points = [Point(NOW, 4e-3, "alice"), Point(NOW + timedelta(hours=1), 2e-3, "bob <b>")]
    svg = str(score_chart([Series("best", points)], title="Best on cpu"))
    assert svg.startswith("<svg") and svg.count("<circle") == 2
    assert "bob &lt;b&gt;" in svg and "<b>" not in svg


def test_a_chart_without_points_says_so() -> None:
    assert "No ranked results yet" in str(score_chart([Series("best", [])], title="x"))


def test_every_block_survives_the_wire_to_the_remote_cli() -> None:
    reply = Reply(blocks=[Text("hello", "success"), Table(("a", "b"), (("1", "2"),), "t"), Code("x = 1", "python"),
                          File("log.txt", b"text\n", "a log"), File("blob.bin", b"\xff\x00", "binary"),
                          Image("p.png", b"\x89PNG", "a chart"), ProgressBlock(3, "cpu", "queued", queue_position=2)],
                  ok=False, submission_id=7)
    wire = httpx.Response(200, json=reply_out(reply).model_dump(mode="json"))
    back = reply_of(wire)
    assert back.blocks == reply.blocks
    assert (back.ok, back.submission_id) == (False, 7)


def test_refusals_map_to_http_statuses() -> None:
    assert status_of(Reply()) == 200
    for kind, status in (("not_found", 404), ("forbidden", 403), ("too_large", 413), ("refused", 409),
                         ("rate_limited", 429), ("invalid", 422), ("internal", 500)):
        assert status_of(Reply(ok=False, problem=Problem(kind))) == status, kind
