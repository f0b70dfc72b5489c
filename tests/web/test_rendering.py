"""The pieces the pages and the remote CLI are drawn with: descriptions (read on the page itself too), charts,
replies on the wire."""

from __future__ import annotations

import base64
import io
import re
import zipfile
from datetime import timedelta

import httpx

from kernelcup.adapters.terminal.remote import reply_of
from kernelcup.adapters.web.charts import Point, Series, score_chart
from kernelcup.adapters.web.markdown import render
from kernelcup.adapters.web.replies import reply_out, status_of
from kernelcup.core.messages import Code, File, Image, ProgressBlock, Refusal, Reply, Table, Text
from tests.web.conftest import NOW, ROOT, Tokens, bearer

HOSTILE = "<script>alert(1)</script> and [x](javascript:alert(1)) `a<b` <img src=x onerror=alert(1)>"


def _board_described_as(description: str) -> str:
    """The identity leaderboard as a creator uploads it (base64 zip), with ``description``."""
    task = (ROOT / "leaderboards" / "identity" / "task.yml").read_text()
    first_line = "  Copy a vector: `output[i] = input[i]`."
    assert first_line in task
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in (ROOT / "leaderboards" / "identity").glob("*.py"):
            bundle.write(path, f"board/{path.name}")
        bundle.write(ROOT / "leaderboards" / "utils.py", "board/utils.py")
        bundle.writestr("board/task.yml", task.replace(first_line, f"  {description}"))
    return base64.b64encode(buffer.getvalue()).decode()


async def test_a_description_cannot_inject_html(client: httpx.AsyncClient, tokens: Tokens) -> None:
    """A creator's task.yml description, shown on the leaderboard's page, is text: no script, no
    tag, no javascript: link gets through (the page's whole HTML is read, not only the renderer)."""
    created = await client.post("/api/commands/create", headers=bearer(tokens.admin), json={
        "name": "hostile", "gpu": ["cpu"], "deadline": "+7d",
        "attachments": [{"name": "board.zip", "base64": _board_described_as(HOSTILE)}],
    })
    assert created.status_code == 200, created.text
    page = await client.get("/leaderboards/hostile")
    assert page.status_code == 200
    html = page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html  # the description is on the page, as text
    assert "<code>a&lt;b</code>" in html
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert not re.search(r"""href\s*=\s*["']?\s*javascript:""", html, re.IGNORECASE)


def test_the_description_renderer_escapes_html_and_keeps_no_javascript_link() -> None:
    html = str(render(HOSTILE))
    assert "<script>" not in html and "<img" not in html and "javascript:" not in str(html.split("href")[1:])
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
        assert status_of(Reply(ok=False, problem=Refusal(kind))) == status, kind
