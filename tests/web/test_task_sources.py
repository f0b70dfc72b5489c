"""A creator's task.yml cannot read server files: every source resolves inside the uploaded
folder, through the real ``POST /api/commands/create`` route (SECURITY.md, "task.yml")."""

from __future__ import annotations

import base64
import io
import os
import zipfile

import httpx
import pytest

from tests.web.conftest import ROOT, Tokens, bearer

IDENTITY = ROOT / "leaderboards" / "identity"


def _bundle(task_yml: str, extra: dict[str, bytes] | None = None) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in IDENTITY.glob("*.py"):
            bundle.write(path, f"board/{path.name}")
        bundle.write(ROOT / "leaderboards" / "utils.py", "board/utils.py")
        bundle.writestr("board/task.yml", task_yml)
        for name, data in (extra or {}).items():
            bundle.writestr(f"board/{name}", data)
    return base64.b64encode(buffer.getvalue()).decode()


def _task_naming(source: str, where: str = "files") -> str:
    text = (IDENTITY / "task.yml").read_text()
    if where == "files":
        return text.replace("source: task.py}", f"source: {source!r}}}")
    return text.replace("Python: template.py", f"Python: {source!r}")


async def _create(client: httpx.AsyncClient, tokens: Tokens, name: str, bundle: str) -> httpx.Response:
    return await client.post("/api/commands/create", headers=bearer(tokens.admin), json={
        "name": name, "gpu": ["cpu"], "deadline": "+7d",
        "attachments": [{"name": "board.zip", "base64": bundle}],
    })


@pytest.mark.parametrize("where", ["files", "templates"])
@pytest.mark.parametrize("source", [
    "/proc/self/environ", "/etc/hostname", "../../../../../../../etc/hostname", "/dev/zero",
    "/sys/kernel/hostname", "../../../../../../../proc/self/cmdline", "nosuchfile.py",
])
async def test_a_source_outside_the_folder_is_refused_like_a_missing_one(
    client: httpx.AsyncClient, tokens: Tokens, source: str, where: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "never-in-a-reply")
    response = await _create(client, tokens, "stolen", _bundle(_task_naming(source, where)))
    assert response.status_code == 422, response.text
    text = response.text
    assert "is not a file inside the leaderboard folder" in text  # the same answer for every case
    assert "never-in-a-reply" not in text and os.uname().nodename not in text
    assert (await client.get("/api/leaderboards/stolen")).status_code == 404


async def test_a_binary_source_is_a_clear_refusal_not_a_server_error(client: httpx.AsyncClient, tokens: Tokens) -> None:
    bundle = _bundle(_task_naming("blob.bin"), {"blob.bin": bytes(range(256)) * 4})
    response = await _create(client, tokens, "binary", bundle)
    assert response.status_code == 422 and "not UTF-8 text" in response.text


async def test_a_bundles_own_utils_beside_task_yml_is_still_found(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await _create(client, tokens, "bundled", _bundle((IDENTITY / "task.yml").read_text()))
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("name", ["a/b", "../../etc", "<script>alert(1)</script>", "x" * 65, "-dash", ""])
async def test_a_leaderboard_name_that_could_break_a_url_a_path_or_a_page_is_refused(
    client: httpx.AsyncClient, tokens: Tokens, name: str,
) -> None:
    response = await _create(client, tokens, name or " ", _bundle((IDENTITY / "task.yml").read_text()))
    assert response.status_code == 422, response.text
    assert "cannot be a leaderboard name" in response.text


async def test_a_typo_hint_never_names_a_hidden_leaderboard(client: httpx.AsyncClient, tokens: Tokens) -> None:
    bundle = _bundle((IDENTITY / "task.yml").read_text())
    response = await client.post("/api/commands/create", headers=bearer(tokens.admin), json={
        "name": "secret-cup", "gpu": ["cpu"], "deadline": "+7d", "hidden": True,
        "attachments": [{"name": "board.zip", "base64": bundle}],
    })
    assert response.status_code == 200, response.text
    for command in ("show", "task", "template"):
        answer = await client.post(f"/api/commands/{command}", headers=bearer(tokens.bob),
                                   json={"leaderboard": "secret-cu"})
        assert answer.status_code == 404 and "secret-cup" not in answer.text, (command, answer.text)


async def test_a_form_upload_to_a_json_command_route_is_a_clear_422(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await client.post("/api/commands/create", headers=bearer(tokens.admin),
                                 files={"file": ("board.zip", bytes(range(256)) * 8, "application/zip")})
    assert response.status_code == 422, response.text
    assert response.json()["kind"] == "invalid" and "JSON" in response.json()["detail"]


async def test_a_json_route_given_bytes_that_are_not_utf8_is_a_4xx(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await client.post("/api/commands/list", headers={**bearer(tokens.admin),
                                 "content-type": "application/json"}, content=b"\xff\xfe\x00garbage")
    assert 400 <= response.status_code < 500, response.text
