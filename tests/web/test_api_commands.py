"""Every core command as a route generated from the registry, with the core's roles."""

from __future__ import annotations

import base64
import io
import zipfile

import httpx

from kernelcup.core.commands.catalog import commands
from tests.web.conftest import ROOT, Tokens, bearer


async def test_every_registry_command_is_a_documented_route(client: httpx.AsyncClient) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    for cmd in commands():
        assert f"/api/commands/{cmd.name}" in paths, cmd.name
    ban = paths["/api/commands/ban"]["post"]
    assert "admin" in ban["description"]


async def test_an_admin_command_is_403_for_a_user_and_runs_for_an_admin(client: httpx.AsyncClient,
                                                                        tokens: Tokens) -> None:
    refused = await client.post("/api/commands/pause", headers=bearer(tokens.bob))
    assert refused.status_code == 403
    assert refused.json()["blocks"][0] == {"type": "text", "text": "Only admins may use pause.", "style": "error"}
    done = await client.post("/api/commands/pause", headers=bearer(tokens.admin))
    assert done.status_code == 200 and done.json()["ok"] is True


async def test_commands_need_a_token(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/commands/list")
    assert response.status_code == 401 and response.json()["kind"] == "unauthenticated"


async def test_a_reply_carries_tables_as_json(client: httpx.AsyncClient, tokens: Tokens) -> None:
    reply = (await client.post("/api/commands/list", headers=bearer(tokens.bob))).json()
    table = reply["blocks"][0]
    assert table["type"] == "table" and table["columns"][0] == "leaderboard"
    assert [row[0] for row in table["rows"] if row[0] == "identity"] == ["identity"]


async def test_malformed_json_is_422_saying_where(client: httpx.AsyncClient, tokens: Tokens) -> None:
    headers = {**bearer(tokens.bob), "Content-Type": "application/json"}
    response = await client.post("/api/commands/show", headers=headers, content=b'{"leaderboard": "identity",')
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["type"] == "json_invalid" and error["loc"][0] == "body"


async def test_an_unknown_option_or_a_wrong_type_is_422(client: httpx.AsyncClient, tokens: Tokens) -> None:
    unknown = await client.post("/api/commands/show", headers=bearer(tokens.bob),
                                json={"leaderboard": "identity", "colour": "red"})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "colour"]
    wrong = await client.post("/api/commands/show", headers=bearer(tokens.bob),
                              json={"leaderboard": "identity", "limit": "many"})
    assert wrong.status_code == 422 and wrong.json()["detail"][0]["loc"] == ["body", "limit"]


async def test_a_missing_argument_is_422(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await client.post("/api/commands/show", headers=bearer(tokens.bob), json={})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "leaderboard"]


async def test_a_core_refusal_keeps_its_message_and_status(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await client.post("/api/commands/show", headers=bearer(tokens.bob), json={"leaderboard": "nosuch"})
    assert response.status_code == 404
    assert response.json()["problem"] == {"kind": "not_found", "retry_after_s": None}


async def test_create_takes_a_zipped_task_folder_as_attachment(client: httpx.AsyncClient, tokens: Tokens) -> None:
    buffer = io.BytesIO()
    folder = ROOT / "leaderboards" / "identity"
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in folder.glob("*.py"):
            bundle.write(path, f"copy/{path.name}")
        bundle.write(folder / "task.yml", "copy/task.yml")
        bundle.write(ROOT / "leaderboards" / "utils.py", "copy/utils.py")
    response = await client.post("/api/commands/create", headers=bearer(tokens.admin), json={
        "name": "identity2", "gpu": ["cpu"], "deadline": "+7d",
        "attachments": [{"name": "copy.zip", "base64": base64.b64encode(buffer.getvalue()).decode()}],
    })
    assert response.status_code == 200, response.text
    assert (await client.get("/api/leaderboards/identity2")).json()["gpus"] == ["cpu"]


async def test_an_attachment_that_is_not_base64_is_422(client: httpx.AsyncClient, tokens: Tokens) -> None:
    response = await client.post("/api/commands/create", headers=bearer(tokens.admin),
                                 json={"attachments": [{"name": "x.zip", "base64": "not base64!"}]})
    assert response.status_code == 422 and "not valid base64" in response.json()["detail"]
