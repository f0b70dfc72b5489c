"""The commands people use to look around, rank and manage leaderboards."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

from sqlmodel import Session, select

from kernelcup.core.app import Kernelcup
from kernelcup.core.commands.catalog import commands
from kernelcup.core.commands.parsing import parse_line
from kernelcup.core.messages import File, Table, Text
from kernelcup.core.store.models import Leaderboard
from tests.core.conftest import ALICE, BOB, ROOT, InstantRunner, finish, request, solution

CAROL = BOB.__class__("slack:T1/U3", "carol")
DAVE = BOB.__class__("slack:T1/U4", "dave")


async def test_first_start_syncs_every_shipped_leaderboard(app: Kernelcup) -> None:
    reply = await app.handle(request("list"))
    table = next(b for b in reply.blocks if isinstance(b, Table))
    names = {row[0] for row in table.rows}
    shipped = {p.name for p in (ROOT / "leaderboards").iterdir() if (p / "task.yml").is_file()}
    assert names == shipped
    # open on the GPU a runner serves here (the multi-GPU ones say how many ranks a run uses); the
    # CUDA one on none, the CPU being all this bot has (tests/core/test_cuda_only_boards.py)
    gpus = {row[0]: row[2] for row in table.rows}
    assert gpus.pop("vectoradd_cuda").startswith("no GPU here (needs CUDA")
    assert all(shown in ("cpu", "cpu (multi-GPU: 2 per run)") for shown in gpus.values())
    assert all("closes in" in row[1] for row in table.rows)


async def test_ranked_runs_rank_the_best_score_per_user(app: Kernelcup, runner: InstantRunner) -> None:
    for actor, score in ((BOB, 3e-3), (CAROL, 2e-3), (BOB, 1e-3), (BOB, 5e-3)):
        runner.score_s = score
        reply = await app.handle(request("submit", actor, files={"k.py": solution("vectoradd")}, mode="ranked"))
        assert reply.submission_id is not None
        phases = await finish(app, reply.submission_id)
        assert phases[-1] == "done"
    show = await app.handle(request("show", leaderboard="vectoradd"))
    table = next(b for b in show.blocks if isinstance(b, Table))
    assert [(row[0], row[1], row[2]) for row in table.rows] == [("1", "bob", "1 ms"), ("2", "carol", "2 ms")]


async def test_entries_whose_noise_ranges_meet_share_a_rank(app: Kernelcup, runner: InstantRunner) -> None:
    runner.noise = 0.01
    for actor, score in ((BOB, 1.000e-3), (CAROL, 1.015e-3), (DAVE, 1.2e-3)):
        runner.score_s = score
        reply = await app.handle(request("submit", actor, files={"k.py": solution("vectoradd")}, mode="ranked"))
        assert reply.submission_id is not None
        await finish(app, reply.submission_id)
    show = await app.handle(request("show", leaderboard="vectoradd"))
    table = next(b for b in show.blocks if isinstance(b, Table))
    assert [(row[0], row[1], row[3]) for row in table.rows] == [
        ("1=", "bob", "±1.0%"), ("1=", "carol", "±1.0%"), ("3", "dave", "±1.0%")
    ]
    assert any(isinstance(b, Text) and "tied within noise" in b.text for b in show.blocks)


async def test_the_secret_seed_goes_only_to_ranked_jobs(app: Kernelcup, runner: InstantRunner) -> None:
    for mode in ("test", "ranked"):
        reply = await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode=mode))
        assert reply.submission_id is not None
        await finish(app, reply.submission_id)
    assert [spec.secret_seed is not None for spec in runner.specs] == [False, True]


async def test_report_shows_verdict_score_and_rank(app: Kernelcup) -> None:
    reply = await app.handle(request("submit", files={"k.py": solution("vectoradd")}, mode="ranked"))
    assert reply.submission_id is not None
    await finish(app, reply.submission_id)
    report = await app.submission_report(reply.submission_id)
    assert report.ok
    assert "[cpu] ✅ all tests passed · score 1 ms · rank 1 on cpu" in report.text()


async def test_task_and_template_hand_out_files(app: Kernelcup) -> None:
    task = await app.handle(request("task", leaderboard="vectoradd"))
    names = {b.name for b in task.blocks if isinstance(b, File)}
    assert {"task.py", "reference.py"} <= names
    template = await app.handle(request("template", leaderboard="vectoradd", lang="python"))
    assert template.ok and b"custom_kernel" in next(b for b in template.blocks if isinstance(b, File)).content


async def test_code_is_private_to_its_author_before_the_deadline(app: Kernelcup) -> None:
    reply = await app.handle(request("submit", files={"mine.py": solution("vectoradd")}, mode="test"))
    assert reply.submission_id is not None
    await finish(app, reply.submission_id)
    own = await app.handle(request("get-submission", id=reply.submission_id))
    other = await app.handle(request("get-submission", CAROL, id=reply.submission_id))
    assert any(isinstance(b, File) and b.name == "mine.py" for b in own.blocks)
    assert not any(isinstance(b, File) and b.name == "mine.py" for b in other.blocks)
    assert "private to its author" in other.text()


async def test_mine_lists_only_ones_own(app: Kernelcup) -> None:
    for actor in (BOB, CAROL):
        await app.handle(request("submit", actor, files={"k.py": solution("vectoradd")}, mode="test"))
    reply = await app.handle(request("mine"))
    table = next(b for b in reply.blocks if isinstance(b, Table))
    assert len(table.rows) == 1


def _zip_of(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as bundle:
        for path in folder.iterdir():
            if path.is_file():
                bundle.write(path, f"{folder.name}/{path.name}")
        bundle.write(ROOT / "leaderboards" / "utils.py", f"{folder.name}/utils.py")
    return buffer.getvalue()


async def test_create_from_a_zip_needs_the_creator_role(app: Kernelcup) -> None:
    bundle = {"identity.zip": _zip_of(ROOT / "leaderboards" / "identity")}
    refused = await app.handle(request("create", BOB, files=bundle, name="copy", deadline="+7d"))
    assert not refused.ok and "Only creators" in refused.text()
    created = await app.handle(request("create", ALICE, files=bundle, name="copy", deadline="+7d", gpu=["cpu"]))
    assert created.ok, created.text()
    reply = await app.handle(request("submit", files={"k.py": solution("identity")}, mode="test",
                                     leaderboard="copy"))
    assert reply.ok, reply.text()


async def test_create_refuses_a_deadline_without_zone(app: Kernelcup) -> None:
    bundle = {"identity.zip": _zip_of(ROOT / "leaderboards" / "identity")}
    reply = await app.handle(request("create", ALICE, files=bundle, name="x", deadline="2030-01-01T00:00"))
    assert not reply.ok and "no time zone" in reply.text()


async def test_delete_asks_for_confirmation(app: Kernelcup) -> None:
    await app.handle(request("submit", files={"k.py": solution("identity")}, mode="test"))
    first = await app.handle(request("delete", ALICE, leaderboard="identity"))
    assert not first.ok and "--yes" in first.text()
    second = await app.handle(request("delete", ALICE, leaderboard="identity", yes=True))
    assert second.ok and "1 submissions" in second.text()
    with Session(app.engine) as session:
        assert session.exec(select(Leaderboard).where(Leaderboard.name == "identity")).first() is None


async def test_help_lists_only_what_the_role_may_use(app: Kernelcup) -> None:
    user_help = (await app.handle(request("help"))).text()
    admin_help = (await app.handle(request("help", ALICE))).text()
    assert "submit" in user_help and "ban" not in user_help
    assert "ban" in admin_help


def test_chat_lines_parse_like_the_platforms_send_them() -> None:
    assert parse_line("/leaderboard submit ranked kernel.py --gpu H100 --gpu A100") == (
        "submit", {"mode": "ranked", "file": "kernel.py", "gpu": ["H100", "A100"]})
    assert parse_line("/admin rate-limit vectoradd ranked 5") == (
        "rate-limit", {"leaderboard": "vectoradd", "mode": "ranked", "per_hour": "5"})
    assert parse_line("delete vectoradd --yes") == ("delete", {"leaderboard": "vectoradd", "yes": True})


def test_every_command_has_help_and_a_group() -> None:
    for cmd in commands():
        assert cmd.help and cmd.group in ("leaderboard", "admin")
