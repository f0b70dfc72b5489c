"""The final standings end to end on this machine's GPU: real harness, real noise, real ties.

Not a pytest module (CI has no GPU). From the repository root of a machine with CUDA:

    python tests/scheduling/gpu_final.py [--rounds 3] [--small] [--out results.md]
                                         [--probe SECONDS] [--harness-user USER]

It starts a kernelcup (SQLite in a temporary folder, the local runner on the GPU it detects,
the scheduler on), creates an ``identity`` leaderboard, submits four ranked entries: the PyTorch
copy twice under two names (the same kernel: they should tie), the Triton copy, and a copy that
reads and writes twice (clearly slower), then closes the leaderboard with ``set-deadline +0m``
and waits for the final standings. It prints them with each entry's per-round scores and the
order the re-runs ran in. ``--small`` uses tiny inputs, to try the script on a CPU.
``--probe`` only runs one ``test`` submission and shows its report (exit 1 if it did not end in
time); ``--harness-user`` hands KERNELCUP_HARNESS_USER to the harness (the local runner passes
the harness no environment of ours otherwise).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sqlmodel import col, select  # noqa: E402

from kernelcup.core.app import Kernelcup  # noqa: E402
from kernelcup.core.config import load_settings  # noqa: E402
from kernelcup.core.messages import Actor, Attachment, Reply, Request  # noqa: E402
from kernelcup.core.scheduling.announcements import Announcement, Occasion  # noqa: E402
from kernelcup.core.store.db import make_engine, session_scope, upgrade  # noqa: E402
from kernelcup.core.store.models import FINAL_MODE, FinalRun, Job, Run, User  # noqa: E402
from kernelcup.runners.local import LocalRunner  # noqa: E402

SLOWER = b'''#!POPCORN leaderboard identity
"""A copy through a temporary: twice the memory traffic."""

from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    x, output = data
    output.copy_(x * 1.0)
    return output
'''


def tiny_identity(root: Path) -> Path:
    """The identity task with one small test and one small benchmark: seconds per run on a CPU."""
    folder = root / "tiny"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "leaderboards/utils.py", root / "utils.py")
    for name in ("reference.py", "task.py", "template.py"):
        shutil.copy(ROOT / "leaderboards/identity" / name, folder / name)
    task = (ROOT / "leaderboards/identity/task.yml").read_text()
    task = re.sub(r"tests:\n(  - .*\n)+", "tests:\n  - {size: 127, seed: 5236}\n", task)
    task = re.sub(r"benchmarks:\n(  - .*\n)+", "benchmarks:\n  - {size: 4096, seed: 54352}\n", task)
    (folder / "task.yml").write_text(task.replace("  Triton: template_triton.py\n", ""))
    return folder


class Recorder:
    platform = "recording"

    def __init__(self) -> None:
        self.posts: list[Reply] = []

    async def announce(self, channel: str, reply: Reply) -> None:
        self.posts.append(reply)


async def ask(app: Kernelcup, command: str, actor: Actor, files: dict[str, bytes] | None = None,
              **args: object) -> Reply:
    reply = await app.handle(Request(actor, command, dict(args), [Attachment(n, c) for n, c in (files or {}).items()],
                                     from_this_machine=True))  # the bot's own terminal: folders by path
    if not reply.ok:
        raise SystemExit(f"{command} failed: {reply.text()}")
    return reply


async def probe(app: Kernelcup, admin: Actor, gpu: str, wait_s: float) -> int:
    code = (ROOT / "leaderboards/identity/solutions/pytorch.py").read_bytes()
    reply = await ask(app, "submit", admin, {"k.py": code}, mode="test", leaderboard="cup", gpu=[gpu])
    assert reply.submission_id is not None

    async def follow() -> None:
        async for event in app.follow(reply.submission_id or 0):
            print(f"  {event.phase} {event.done}/{event.total}", flush=True)

    try:
        await asyncio.wait_for(follow(), wait_s)
    except TimeoutError:
        print(f"probe: the test run did not end within {wait_s:g} s", flush=True)
        return 1
    print((await app.submission_report(reply.submission_id)).text(), flush=True)
    return 0


async def main(rounds: int, small: bool, out: Path | None, probe_s: float | None) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="kernelcup-gpu-final-"))
    base = load_settings(env={})
    (tmp / "none").mkdir()
    schedule = {"start_delay": "0s", "final_poll": "0.5s", "final_top_n": 4, "final_rounds": rounds}
    settings = replace(base, leaderboards_dir=tmp / "none", announcements={"recording": {"*": "#results"}},
                       sections={**base.sections, "schedule": schedule})
    engine = make_engine(f"sqlite:///{tmp}/kernelcup.db")
    upgrade(engine)
    runner = LocalRunner(settings)
    gpu = runner.gpus()[0]
    app = Kernelcup(settings, engine, {"local": runner})
    recorder = Recorder()
    app.announcements.register(recorder)
    await app.start()
    started = time.monotonic()
    try:
        folder = tiny_identity(tmp / "boards") if small else ROOT / "leaderboards/identity"
        admin = Actor("console:admin", "admin")
        await ask(app, "create", admin, folder=str(folder), name="cup", deadline="+1d", gpu=[gpu])
        if probe_s is not None:
            return await probe(app, admin, gpu, probe_s)
        solutions = ROOT / "leaderboards/identity/solutions"
        pytorch = (solutions / "pytorch.py").read_bytes()
        entries = [("alice", pytorch), ("bob", pytorch + b"\n# bob's copy of the same kernel\n"), ("dave", SLOWER)]
        if gpu != "cpu":
            entries.insert(2, ("carol", (solutions / "triton.py").read_bytes()))
        for name, code in entries:
            reply = await ask(app, "submit", Actor(f"console:{name}", name), {"k.py": code}, mode="ranked",
                              leaderboard="cup", gpu=[gpu])
            assert reply.submission_id is not None
            async for _ in app.follow(reply.submission_id):
                pass
            print((await app.submission_report(reply.submission_id)).text().splitlines()[2], flush=True)
        ranked_s = time.monotonic() - started
        await ask(app, "set-deadline", admin, leaderboard="cup", deadline="+0m")
        while not any(a.occasion is Occasion.FINAL_STANDINGS for _, _, a in _sent(app)):
            await asyncio.sleep(0.5)
        final_s = time.monotonic() - started - ranked_s
        report = _report(app, gpu, rounds, ranked_s, final_s)
    finally:
        await app.stop()
        engine.dispose()
    print(report)
    if out is not None:
        out.write_text(report)
    return 0


def _sent(app: Kernelcup) -> list[tuple[str, str, Announcement]]:
    return app.announcements.sent


def _report(app: Kernelcup, gpu: str, rounds: int, ranked_s: float, final_s: float) -> str:
    final = next(a.reply for _, _, a in _sent(app) if a.occasion is Occasion.FINAL_STANDINGS)
    lines = [f"# Final standings on {gpu}", "", f"{rounds} rounds; ranked runs took {ranked_s:.0f} s, "
             f"the close and final standings {final_s:.0f} s.", "", "```", final.text(), "```", "",
             "Re-runs in the order they ran (job id, user, score):", ""]
    with session_scope(app.engine) as session:
        names = dict(session.exec(select(User.id, User.display_name)).all())
        reruns = session.exec(select(FinalRun)).all()
        owner = {rerun.submission_id: names[rerun.user_id] for rerun in reruns}
        jobs = session.exec(select(Job, Run).join(Run, col(Run.job_id) == col(Job.id))
                            .where(col(Run.mode) == FINAL_MODE).order_by(col(Job.started_at), col(Job.id))).all()
        for job, run in jobs:
            score = f"{run.score * 1e6:.2f} µs" if run.score is not None else "failed"
            lines.append(f"- job {job.id}: {owner[job.submission_id]} {score}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="tiny inputs, to try it on a CPU")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    parser.add_argument("--probe", type=float, metavar="SECONDS", help="only one test run, waited for this long")
    parser.add_argument("--harness-user", help="KERNELCUP_HARNESS_USER for the harness, e.g. none")
    parser.add_argument("--full-env", action="store_true", help="hand the harness this whole environment")
    options = parser.parse_args()
    if options.harness_user is not None or options.full_env:
        import os

        import kernelcup.runners.local

        plain_env = kernelcup.runners.local.harness_env
        extra = dict(os.environ) if options.full_env else {}
        if options.harness_user is not None:
            extra["KERNELCUP_HARNESS_USER"] = options.harness_user
        kernelcup.runners.local.harness_env = lambda environ=None: {**extra, **plain_env(environ)}  # type: ignore[misc]
    sys.exit(asyncio.run(main(options.rounds, options.small, options.out, options.probe)))
