"""Reading leaderboards, rankings, history and users over the REST API."""

from __future__ import annotations

import httpx
import pytest
from sqlmodel import select

from kernelcup.core.app import Kernelcup
from kernelcup.core.store.db import session_scope
from kernelcup.core.store.models import Leaderboard
from tests.web.conftest import ALICE, BOB, Tokens, bearer, finish, solution, submit


async def ranked(client: httpx.AsyncClient, kc: Kernelcup, token: str, score: float,
                 gpus: tuple[str, ...] = ("cpu",)) -> int:
    response = await submit(client, token, solution() + f"\n# score: {score}\n".encode(), mode="ranked", gpus=gpus)
    assert response.status_code == 202, response.text
    submission_id: int = response.json()["submission_id"]
    await finish(kc, submission_id)
    return submission_id


def hide(kc: Kernelcup, name: str) -> None:
    with session_scope(kc.engine) as session:
        board = session.exec(select(Leaderboard).where(Leaderboard.name == name)).one()
        board.visibility = "hidden"
        session.add(board)


async def test_anyone_lists_the_leaderboards_with_deadline_gpus_and_entries(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/leaderboards")
    assert response.status_code == 200
    boards = {b["name"]: b for b in response.json()}
    assert {"identity", "vectoradd", "matmul"} <= boards.keys()
    identity = boards["identity"]
    assert identity["gpus"] == ["H100", "cpu"] and identity["entries"] == 0
    assert identity["deadline"] == "2027-11-21T12:00:00Z" and identity["closed"] is False


async def test_a_leaderboard_reads_with_its_description_and_task_counts(client: httpx.AsyncClient) -> None:
    board = (await client.get("/api/leaderboards/identity")).json()
    assert board["description"].startswith("Copy a vector")
    assert (board["tests"], board["benchmarks"], board["ranking_by"]) == (5, 2, "geom")
    assert board["templates"] == ["Python", "Triton"]


async def test_an_unknown_leaderboard_is_404_with_a_message(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/leaderboards/nosuch")
    assert response.status_code == 404
    assert response.json()["detail"] == "There is no leaderboard 'nosuch'."


async def test_a_hidden_leaderboard_is_unknown_to_users_and_shown_to_admins(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    hide(kc, "matmul")
    assert (await client.get("/api/leaderboards/matmul", headers=bearer(tokens.bob))).status_code == 404
    assert "matmul" not in {b["name"] for b in (await client.get("/api/leaderboards")).json()}
    admin_view = (await client.get("/api/leaderboards/matmul", headers=bearer(tokens.admin))).json()
    assert admin_view["hidden"] is True


async def test_rankings_come_per_gpu_with_throughput_from_the_entry_run(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    await ranked(client, kc, tokens.alice, 0.002)
    await ranked(client, kc, tokens.bob, 0.001, gpus=("cpu", "H100"))
    rankings = {r["gpu"]: r["entries"] for r in (await client.get("/api/leaderboards/identity/rankings")).json()}
    cpu = [(e["rank"], e["user_name"], e["score_s"]) for e in rankings["cpu"]]
    assert cpu == [(1, "bob", 0.001), (2, "alice", 0.002)]
    assert [e["user_name"] for e in rankings["H100"]] == ["bob"]
    assert rankings["cpu"][0]["gbps"] == pytest.approx(2000.0)
    assert rankings["cpu"][0]["percent_of_peak"] == pytest.approx(50.0)


async def test_entries_whose_noise_ranges_meet_are_shown_tied(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    await ranked(client, kc, tokens.alice, 0.00102)  # each case's interval is ±5% in this runner
    await ranked(client, kc, tokens.bob, 0.001)
    rankings = {r["gpu"]: r["entries"] for r in (await client.get("/api/leaderboards/identity/rankings")).json()}
    cpu = rankings["cpu"]
    assert [(e["rank"], e["rank_label"], e["user_name"]) for e in cpu] == [(1, "1=", "bob"), (2, "1=", "alice")]
    assert cpu[0]["score_low_s"] == pytest.approx(0.00095)
    assert cpu[0]["score_high_s"] == pytest.approx(0.00105)


async def test_rankings_of_one_gpu_and_an_unknown_gpu(client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens) -> None:
    await ranked(client, kc, tokens.alice, 0.002)
    only = (await client.get("/api/leaderboards/identity/rankings", params={"gpu": "CPU"})).json()
    assert [r["gpu"] for r in only] == ["cpu"]
    response = await client.get("/api/leaderboards/identity/rankings", params={"gpu": "TPU"})
    assert response.status_code == 404 and "does not run on TPU" in response.json()["detail"]


async def test_history_has_each_improvement_of_the_best_score(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    await ranked(client, kc, tokens.alice, 0.004)
    await ranked(client, kc, tokens.bob, 0.005)  # not better than the best: no point
    best = await ranked(client, kc, tokens.bob, 0.003)
    points = (await client.get("/api/leaderboards/identity/history", params={"gpu": "cpu"})).json()
    assert [(p["user_name"], p["score_s"]) for p in points] == [("alice", 0.004), ("bob", 0.003)]
    assert points[-1]["submission_id"] == best


async def test_me_names_the_token_owner_and_their_role(client: httpx.AsyncClient, tokens: Tokens) -> None:
    bob = (await client.get("/api/me", headers=bearer(tokens.bob))).json()
    assert (bob["identity"], bob["name"], bob["role"]) == (BOB.identity, "bob", "user")
    assert (await client.get("/api/me", headers=bearer(tokens.admin))).json()["role"] == "admin"


async def test_a_user_lists_their_submissions_newest_first(client: httpx.AsyncClient, kc: Kernelcup,
                                                           tokens: Tokens) -> None:
    first = await ranked(client, kc, tokens.alice, 0.004)
    second = await ranked(client, kc, tokens.alice, 0.003)
    me = (await client.get("/api/me", headers=bearer(tokens.alice))).json()
    person = (await client.get(f"/api/users/{me['user_id']}")).json()
    assert person["name"] == ALICE.display_name
    assert [s["id"] for s in person["submissions"]] == [second, first]
    mine = (await client.get("/api/submissions", params={"mine": "true"}, headers=bearer(tokens.alice))).json()
    assert [s["outcome"] for s in mine] == ["cpu: passed 3 ms", "cpu: passed 4 ms"]


async def test_unknown_ids_are_404(client: httpx.AsyncClient) -> None:
    for path in ("/api/submissions/999", "/api/users/999", "/api/submissions/999/events",
                 "/api/submissions/999/report"):
        response = await client.get(path)
        assert response.status_code == 404, path
        assert response.json()["kind"] == "not_found"


async def test_a_multi_gpu_leaderboard_says_how_many_gpus_a_run_uses(client: httpx.AsyncClient) -> None:
    boards = {b["name"]: b for b in (await client.get("/api/leaderboards")).json()}
    assert boards["allreduce"]["world_size"] == 2 and boards["identity"]["world_size"] == 0
    assert boards["allreduce"]["gpus"] == ["cpu"]  # the served H100 has one card
    page = await client.get("/leaderboards/allreduce")
    assert "multi-GPU: 2 GPUs per run" in page.text
    listing = await client.get("/")
    assert "2 GPUs</span>" in listing.text


async def test_a_ranked_submission_reads_with_each_rounds_median(
    client: httpx.AsyncClient, kc: Kernelcup, tokens: Tokens
) -> None:
    submission_id = await ranked(client, kc, tokens.alice, 0.002)
    done = (await client.get(f"/api/submissions/{submission_id}")).json()
    case = done["jobs"][0]["benchmarks"][0]
    assert case["round_median_s"] == pytest.approx([0.00198, 0.00202])
