"""Private leaderboards: a non-member is refused submit and sees nothing of the board, in words
identical to those for a leaderboard that does not exist; a member by invite code or by role gets
in. (The web's side: tests/web/test_private_boards.py; Slack and Discord: their folders.)"""

from __future__ import annotations

import re

from kernelcup.core.app import Kernelcup
from kernelcup.core.messages import Actor, Reply, Table
from tests.core.conftest import ALICE, BOB, finish, request, solution

BOARD, MISSING = "identity", "nosuch-cup"
CAROL = Actor("discord:77", "carol", ("discord-role:1234", "discord-role:Class-2026"))
DAVE = Actor("discord:78", "dave", ("discord-role:Other",))


def _answer(reply: Reply) -> tuple[bool, str]:
    return reply.ok, reply.text()


async def _make_private(app: Kernelcup, *extra: str) -> str:
    """Alice (an admin) makes the board private with a code; the code shown to her."""
    reply = await app.handle(request("private", ALICE, leaderboard=BOARD, code=True,
                                     roles=list(extra) or None))
    assert reply.ok and reply.ephemeral, reply.text()
    found = re.search(r"Invite code: (\S+)", reply.text())
    assert found, reply.text()
    return found.group(1)


async def _asks(app: Kernelcup, actor: Actor, name: str) -> dict[str, tuple[bool, str]]:
    """Everything a viewer can ask about a leaderboard by name, the name swapped for a marker."""
    asks: dict[str, dict[str, object]] = {
        "show": {"leaderboard": name}, "task": {"leaderboard": name}, "template": {"leaderboard": name},
        "mine": {"leaderboard": name}, "join": {"leaderboard": name, "code": "not-the-code"},
        "submit": {"leaderboard": name, "mode": "test", "gpu": ["cpu"]}}
    out = {}
    for command, args in asks.items():
        files = {"k.py": solution(BOARD)} if command == "submit" else None
        ok, text = _answer(await app.handle(request(command, actor, files=files, **args)))
        out[command] = (ok, text.replace(name, "NAME"))
    return out


def _listed(reply: Reply) -> set[str]:
    return {row[0] for block in reply.blocks if isinstance(block, Table) for row in block.rows}


async def test_a_non_member_sees_nothing_and_is_refused_submit_as_for_a_missing_board(app: Kernelcup) -> None:
    await _make_private(app)
    assert BOARD not in _listed(await app.handle(request("list", BOB)))
    private = await _asks(app, BOB, BOARD)
    missing = await _asks(app, BOB, MISSING)
    assert private == missing
    assert not any(ok for ok, _ in private.values())


async def test_the_invite_code_lets_a_member_in(app: Kernelcup) -> None:
    code = await _make_private(app)
    joined = await app.handle(request("join", BOB, leaderboard=BOARD, code=code))
    assert joined.ok, joined.text()
    assert BOARD in _listed(await app.handle(request("list", BOB)))
    assert (await app.handle(request("show", BOB, leaderboard=BOARD))).ok
    submitted = await app.handle(request("submit", BOB, files={"k.py": solution(BOARD)}, mode="test",
                                         leaderboard=BOARD, gpu=["cpu"]))
    assert submitted.submission_id is not None, submitted.text()
    await finish(app, submitted.submission_id)


async def test_a_new_code_ends_the_old_one(app: Kernelcup) -> None:
    old = await _make_private(app)
    await _make_private(app)
    refused = await app.handle(request("join", BOB, leaderboard=BOARD, code=old))
    missing = await app.handle(request("join", BOB, leaderboard=MISSING, code=old))
    assert (refused.ok, refused.text().replace(BOARD, "NAME")) == (missing.ok, missing.text().replace(MISSING, "NAME"))

async def test_a_holder_of_a_listed_role_is_a_member_without_a_code(app: Kernelcup) -> None:
    await _make_private(app, "discord-role:Class-2026")
    assert BOARD in _listed(await app.handle(request("list", CAROL)))
    submitted = await app.handle(request("submit", CAROL, files={"k.py": solution(BOARD)}, mode="test",
                                         leaderboard=BOARD, gpu=["cpu"]))
    assert submitted.submission_id is not None, submitted.text()
    assert BOARD not in _listed(await app.handle(request("list", DAVE)))


async def test_a_removed_member_is_out_again(app: Kernelcup) -> None:
    code = await _make_private(app)
    assert (await app.handle(request("join", BOB, leaderboard=BOARD, code=code))).ok
    removed = await app.handle(request("private", ALICE, leaderboard=BOARD, remove=BOB.identity))
    assert "no longer a member" in removed.text()
    assert BOARD not in _listed(await app.handle(request("list", BOB)))


async def test_only_the_creator_or_an_admin_changes_who_may_join(app: Kernelcup) -> None:
    reply = await app.handle(request("private", BOB, leaderboard=BOARD, code=True))
    assert not reply.ok  # bob is a user: private needs the creator role, and the board's creator
    assert BOARD in _listed(await app.handle(request("list", BOB)))


async def test_public_opens_it_again(app: Kernelcup) -> None:
    await _make_private(app)
    assert (await app.handle(request("private", ALICE, leaderboard=BOARD, public=True))).ok
    assert BOARD in _listed(await app.handle(request("list", BOB)))
