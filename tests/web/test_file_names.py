"""A submitted file's name is the uploader's words (issue #37): wherever it is shown — the API,
the pages, a chat reply — it has no folders and no control or bidirectional characters."""

from __future__ import annotations

import re
import unicodedata

import httpx
import pytest
from sqlalchemy import update
from sqlmodel import col

from kernelcup.core.app import Kernelcup
from kernelcup.core.file_names import shown_file_name
from kernelcup.core.messages import Actor, Attachment, File, Reply, Request
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Submission
from tests.web.conftest import ALICE, Tokens, bearer, finish, solution

DISCORD_USER = Actor("discord:77", "dora")
# (as uploaded, as shown)
NAMES = [
    ("../../../../etc/cron.d/evil.py", "evil.py"),
    ("kernel\u202egnp.py", "kernelgnp.py"),  # U+202E: "kernel" then "yp.png" read backwards
    ("..\\..\\Windows\\System32\\k.py", "k.py"),
    ("\u2067trusted\u2069\u200f\u061c.py", "trusted.py"),
    ("a\x1b[31mb\x07.py", "a[31mb.py"),
]
PATH_PARTS = ("../", "..\\", "etc/cron.d", "Windows", "System32")


def hidden_characters(text: str) -> list[str]:
    """Control and format characters (the bidirectional ones among them); newlines and tabs are layout."""
    return [f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t"]


def assert_clean(text: str, shown: str, where: str) -> None:
    assert shown in text, f"{where}: {shown!r} not in {text!r}"
    assert not hidden_characters(text), f"{where}: {hidden_characters(text)} in {text!r}"
    assert not [part for part in PATH_PARTS if part in text], f"{where}: a path part in {text!r}"


def test_a_name_is_shown_as_its_last_part_without_hidden_characters() -> None:
    for uploaded, shown in NAMES:
        assert shown_file_name(uploaded) == shown
    assert shown_file_name("../..") == shown_file_name("\u202e") == "unnamed"
    long = shown_file_name("x" * 300 + ".py")
    assert len(long) == 100 and long.endswith(".py")


async def _post(client: httpx.AsyncClient, token: str, uploaded: str, route: str) -> tuple[int, str]:
    """The submission's id and the answer's text, by a multipart upload or the JSON command route
    (where the name arrives exactly as written; httpx escapes some control characters in a form)."""
    if route == "multipart":
        response = await client.post("/api/submissions", headers=bearer(token),
                                     data={"mode": "test", "leaderboard": "identity", "gpu": ["cpu"]},
                                     files={"file": (uploaded, solution(), "text/x-python")})
        assert response.status_code == 202, response.text
        return response.json()["submission_id"], response.json()["message"]
    response = await client.post("/api/commands/submit", headers=bearer(token), json={
        "mode": "test", "leaderboard": "identity", "gpu": ["cpu"],
        "attachments": [{"name": uploaded, "text": solution().decode()}]})
    assert response.status_code == 200, response.text
    return response.json()["submission_id"], response.json()["text"]


@pytest.mark.parametrize(("uploaded", "shown", "route"), [
    *((uploaded, shown, "commands") for uploaded, shown in NAMES),
    *((uploaded, shown, "multipart") for uploaded, shown in NAMES[:2]),
])
async def test_the_api_and_the_pages_show_a_hostile_file_name_cut_to_its_name(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens, uploaded: str, shown: str, route: str
) -> None:
    submission_id, answer = await _post(client, tokens.alice, uploaded, route)
    assert_clean(answer, shown, "the answer to the post")
    await finish(kc, submission_id)

    detail = (await client.get(f"/api/submissions/{submission_id}")).json()
    assert detail["file_name"] == shown
    user_id = detail["user_id"]
    listed = (await client.get("/api/submissions", params={"user_id": user_id})).json()
    assert [s["file_name"] for s in listed] == [shown]
    assert [s["file_name"] for s in (await client.get(f"/api/users/{user_id}")).json()["submissions"]] == [shown]
    report = (await client.get(f"/api/submissions/{submission_id}/report", headers=bearer(tokens.alice))).json()
    assert_clean(report["text"], shown, "the report")

    for page in (f"/submissions/{submission_id}", f"/users/{user_id}"):
        html = (await client.get(page)).text
        visible = re.sub(r"<[^>]+>", " ", html)  # the text of the page, links aside
        assert_clean(visible, shown, page)
        assert not hidden_characters(html)


def _texts(reply: Reply) -> str:
    names = [block.name for block in reply.blocks if isinstance(block, File)]
    return "\n".join([reply.text(), *names])


@pytest.mark.parametrize(("uploaded", "shown"), NAMES)
async def test_chat_replies_show_a_hostile_file_name_cut_to_its_name(kc: Kernelcup, uploaded: str,
                                                                     shown: str) -> None:
    """As the Discord adapter hands an attachment over: its name as Discord gave it."""
    submitted = await kc.handle(Request(DISCORD_USER, "submit", {"mode": "test", "leaderboard": "identity",
                                                                 "gpu": ["cpu"]}, [Attachment(uploaded, solution())]))
    assert submitted.submission_id is not None, submitted.text()
    assert_clean(submitted.text(), shown, "the submit reply")
    await finish(kc, submitted.submission_id)
    assert_clean(_texts(await kc.submission_report(submitted.submission_id)), shown, "the report")
    assert_clean(_texts(await kc.handle(Request(DISCORD_USER, "mine"))), shown, "mine")
    looked_up = await kc.handle(Request(DISCORD_USER, "get-submission", {"id": submitted.submission_id}))
    assert_clean(_texts(looked_up), shown, "get-submission")
    code = [b.name for b in looked_up.blocks if isinstance(b, File) and b.description.startswith("code of")]
    assert code == [shown]


async def test_a_refusal_names_the_file_cut_to_its_name(kc: Kernelcup) -> None:
    refused = await kc.handle(Request(ALICE, "submit", {"mode": "test", "leaderboard": "identity", "gpu": ["cpu"]},
                                      [Attachment("../../etc/\u202eevil.cu", b"__global__ void k() {}")]))
    assert refused.problem is not None and refused.problem.kind == "invalid"
    assert_clean(refused.text(), "evil.cu", "the refusal")


async def test_a_name_stored_before_the_rule_is_cut_wherever_it_is_shown(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    """A row written before names were cut at the door keeps its bytes; every surface cuts it."""
    uploaded, shown = NAMES[0][0] + "\u202e", "evil.py"
    submission_id, _ = await _post(client, tokens.alice, "kernel.py", "commands")
    await finish(kc, submission_id)
    with session_scope(kc.engine) as session:
        session.execute(update(Submission).where(col(Submission.id) == submission_id).values(file_name=uploaded))

    detail = (await client.get(f"/api/submissions/{submission_id}")).json()
    assert detail["file_name"] == shown
    assert [s["file_name"] for s in (await client.get("/api/submissions")).json()] == [shown]
    for page in (f"/submissions/{submission_id}", f"/users/{detail['user_id']}"):
        html = (await client.get(page)).text
        assert_clean(re.sub(r"<[^>]+>", " ", html), shown, page)
        assert not hidden_characters(html)
    assert_clean(_texts(await kc.submission_report(submission_id)), shown, "the report")
    assert_clean(_texts(await kc.handle(Request(ALICE, "mine"))), shown, "mine")
    assert_clean(_texts(await kc.handle(Request(ALICE, "get-submission", {"id": submission_id}))), shown,
                 "get-submission")
