"""Where the seconds of a terminal command go (issue #14): `kernelcup list` and `kernelcup submit
test` cold (a new process; a fresh database, then an existing one), and `submit test` handed to a
running `kernelcup serve`, with the server's own time for it (the bot's warm path).

    python bench/cli_latency.py [--leaderboard FOLDER] [--solution FILE] [--runs 5] [--out FILE]
                                [--baseline PYTHON:REPO] [--ranked-runs N]

``--ranked-runs`` also times N cold `submit ranked` runs on the existing database (issue #36's
turnaround: at most 20 s on the GPU box for pmpp_v2 vectoradd's Triton solution).

``--baseline`` measures another kernelcup beside this one (the code before a change: a checkout
and an interpreter that imports it rather than this one), run for run, so both see the same
load on a shared machine.

Defaults: leaderboards/vectoradd and its solutions/pytorch.py. ``--leaderboard`` takes any
leaderboard folder, GPU MODE's too (e.g. reference-kernels/problems/pmpp_v2/vectoradd_py with
``--solution .../solutions/correct/submission_triton.py``): its parent is the leaderboards
folder, so files it shares with its siblings (``../utils.py``) are found.

Runs on the dev venv (``.venv/bin/python bench/cli_latency.py``) and on a GPU image's
``python3`` where kernelcup is not installed: the repository goes on PYTHONPATH, and since
runners are found through entry points, which only an installed distribution has, the script
then puts a ``kernelcup.dist-info`` with pyproject.toml's entry points beside it. The core's
packages must be importable there (``bench/gpu/wheels.sh`` makes the wheels; its header says
how to install them); the script names what is missing.

Every run is a real process timed from outside. The build cache (``KERNELCUP_CACHE_DIR``) is
emptied once at the start, so the first `submit` compiles (Triton, load_inline) and the later
ones show what a rerun of the same source costs. The breakdown of a submit comes from its log
(timestamps of harness start, job start and end; a kernelcup from before the hand-off logs no
harness start, so its first phase reads 0 and the second holds both) and from ``-X importtime``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WATCHED = ["typer", "rich", "sqlmodel", "sqlalchemy", "pydantic", "structlog", "alembic", "apscheduler", "torch",
           "modal", "httpx"]
NEEDED = ["sqlmodel", "alembic", "structlog", "typer", "rich", "yaml", "apscheduler", "torch"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leaderboard", type=Path, default=REPO / "leaderboards" / "vectoradd")
    parser.add_argument("--solution", type=Path, help="default: the folder's solutions/pytorch.py")
    parser.add_argument("--runs", type=int, default=5, help="runs of each measurement (median shown)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs kernelcup")
    parser.add_argument("--serve-standby", default="1", help="runners.local.standby for the server "
                        "(1: a warm harness, as a GPU's auto; the CPU's auto is 0)")
    parser.add_argument("--pause-s", type=float, default=4.0,
                        help="between submits to the server: time for its standby harness to start again")
    parser.add_argument("--baseline", metavar="PYTHON:REPO", help="also measure another kernelcup (e.g. a "
                        "checkout from before a change, and an interpreter that imports it), each run interleaved "
                        "with this one's so that both see the same load; it gets no server runs")
    parser.add_argument("--ranked-runs", type=int, default=0,
                        help="also time this many cold `submit ranked` runs (existing database)")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    options = parser.parse_args()
    folder = options.leaderboard.resolve()
    solution = (options.solution or folder / "solutions" / "pytorch.py").resolve()
    benches = [Bench("this", options.python, REPO, folder, solution, options.serve_standby)]
    if options.baseline:
        python, _, repo = options.baseline.partition(":")
        benches.insert(0, Bench("baseline", python, Path(repo).resolve(), folder, solution, options.serve_standby))
    try:
        for bench in benches:
            missing = bench.missing_modules()
            if missing:
                print(f"{bench.python} cannot import {', '.join(missing)}: install the core's packages first "
                      "(bench/gpu/wheels.sh makes the wheels; its header says how).", file=sys.stderr)
                return 2
        for bench in benches:
            bench.compile_ahead()
        report = measure(benches, options.runs, options.pause_s, options.ranked_runs)
    finally:
        for bench in benches:
            bench.close()
    print(report)
    if options.out:
        options.out.write_text(report + "\n")
    return 0


def measure(benches: list[Bench], runs: int, pause_s: float, ranked_runs: int = 0) -> str:
    """Every measurement, run after run, each run of each kernelcup in turn."""
    rows: dict[str, dict[str, list[float]]] = {}
    breakdowns: dict[str, list[dict[str, float]]] = {b.label: [] for b in benches}

    def each(what: str, count: int, one: Any) -> None:
        for i in range(count):
            for bench in benches:
                elapsed = one(bench, i)
                rows.setdefault(what, {}).setdefault(bench.label, []).append(elapsed)
                # as it goes: a run cut off by a time limit still leaves what it measured
                print(f"{bench.label}: {what}, run {i + 1}: {elapsed:.2f} s", file=sys.stderr, flush=True)

    def fresh_submit(bench: Bench, i: int) -> float:
        home = bench.work / f"submit{i}"
        elapsed, _ = bench.submit(home)
        breakdown = log_breakdown(home / "var" / "kernelcup.log", bench.launched_at, elapsed)
        breakdown.update(harness_phases(home / "var" / "kernelcup.db"))
        breakdowns[bench.label].append(breakdown)
        return elapsed

    for bench in benches:
        shutil.rmtree(bench.cache, ignore_errors=True)
    each("`list`, fresh database (migrations, first sync)", runs, lambda b, i: b.cli(b.work / f"list{i}", "list")[0])
    each("`list`, existing database", runs, lambda b, i: b.cli(b.work / "list0", "list")[0])
    each("`submit test`, first run of this source (fresh database; builds compile)", 1,
         lambda b, i: b.submit(b.work / "first")[0])  # the build cache was emptied
    each("`submit test`, fresh database, source built before", runs, fresh_submit)
    each("`submit test`, existing database, source built before", runs, lambda b, i: b.submit(b.work / "submit0")[0])
    each("`submit ranked`, existing database, source built before", ranked_runs,
         lambda b, i: b.cli(b.work / "submit0", "submit", "ranked", str(b.solution), "--leaderboard", b.name)[0])
    beside, server_s, served = benches[-1].beside_server(runs, pause_s)
    breakdowns["the server's job"] = served
    rows["`submit test` beside a running `kernelcup serve` (handed to it)"] = {benches[-1].label: beside}
    rows["the server's own time for it (order to report: the bot's warm path)"] = {benches[-1].label: server_s}
    return report(benches, rows, breakdowns)


class Bench:
    """One kernelcup (an interpreter and the repository it runs) and its scratch folder."""

    def __init__(self, label: str, python: str, repo: Path, folder: Path, solution: Path, serve_standby: str) -> None:
        self.label = label
        self.python = python
        self.repo = repo
        self.folder = folder
        self.solution = solution
        self.serve_standby = serve_standby
        # Short: the server's unix socket lives here, and its path has room for ~100 characters.
        self.work = Path(tempfile.mkdtemp(prefix="kcbench", dir="/tmp"))
        self.cache = self.work / "cache"
        self.launched_at = 0.0
        self.name = board_name(folder)
        self.pythonpath = [str(repo)]
        if not installed(python):
            self.pythonpath.append(str(entry_points_folder(self.work / "meta")))

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        inherited = os.environ.get("PYTHONPATH")
        return {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(self.pythonpath + ([inherited] if inherited else [])),
            "KERNELCUP_DATABASE_URL": f"sqlite:///{home}/var/kernelcup.db",
            "KERNELCUP_LEADERBOARDS_DIR": str(self.folder.parent),
            "KERNELCUP_CACHE_DIR": str(self.cache),
            "KERNELCUP_WEB__ENABLED": "false",
            "KERNELCUP_LOGGING__LEVEL": "debug",
            "COLUMNS": "120",
            **extra,
        }

    def missing_modules(self) -> list[str]:
        probe = ("import importlib.util, sys; "
                 "print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))")
        done = subprocess.run([self.python, "-c", probe, *NEEDED], capture_output=True, text=True,
                              env=self.env(self.work))
        return done.stdout.split()

    def cli(self, home: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
        home.mkdir(parents=True, exist_ok=True)
        self.launched_at = time.time()  # the wall clock, as the log's timestamps
        began = time.perf_counter()
        done = subprocess.run([self.python, "-m", "kernelcup.adapters.terminal", *args], cwd=home, env=self.env(home),
                              capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"kernelcup {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return elapsed, done

    def compile_ahead(self) -> None:
        """Bytecode for the repository and for what PYTHONPATH adds, as ``pip install`` writes it
        for installed packages. Where bytecode cannot be written (wheels installed with
        ``--no-compile`` on an image that sets PYTHONDONTWRITEBYTECODE), every command would
        compile SQLAlchemy, pydantic and the rest from source: a suspect, not yet confirmed, for
        ``list`` reading 2.4 s on the H100 image against 0.6 s on the dev box."""
        paths = [str(self.repo / name) for name in ("kernelcup", "core", "adapters", "runners", "harness")]
        extra = os.environ.get("PYTHONPATH", "").split(os.pathsep)
        paths += [entry for entry in extra if entry and Path(entry).is_dir()]
        subprocess.run([self.python, "-m", "compileall", "-q", "-j", "0", *paths], capture_output=True, timeout=600)

    def submit(self, home: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
        return self.cli(home, "submit", "test", str(self.solution), "--leaderboard", self.name)

    def beside_server(self, runs: int, pause_s: float) -> tuple[list[float], list[float], list[dict[str, float]]]:
        home = self.work / "served"
        home.mkdir()
        log = (home / "serve.log").open("w")
        server = subprocess.Popen([self.python, "-m", "kernelcup.adapters.terminal", "serve", "--no-console"], cwd=home,
                                  env=self.env(home, KERNELCUP_RUNNERS__LOCAL__STANDBY=self.serve_standby),
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while not (home / "var" / "kernelcup.sock.d" / "kernelcup.sock").exists():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("kernelcup serve did not open its socket:\n" + (home / "serve.log").read_text())
                time.sleep(0.1)
            time.sleep(pause_s)  # its first standby harness
            self.submit(home)  # one unmeasured: the server's first job warms what it warms
            times = []
            phases = []
            for _ in range(runs):
                time.sleep(pause_s)
                times.append(self.submit(home)[0])
                phases.append(harness_phases(home / "var" / "kernelcup.db"))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=120)
            log.close()
        said = [json.loads(line) for line in (home / "serve.log").read_text().splitlines() if line.startswith("{")]
        handed = [e for e in said if e.get("event") == "hand-off command"]
        if len(handed) != runs + 1:
            raise SystemExit(f"expected {runs + 1} hand-offs in the server's log, found {len(handed)}")
        done = [float(e["elapsed_s"]) for e in said if e.get("event") == "hand-off submission done"]
        return times, done[1:], phases

    def interpreter_start(self) -> float:
        return statistics.median(timed([self.python, "-c", "pass"], self.env(self.work)) for _ in range(5))

    def import_time(self) -> dict[str, float]:
        """Seconds of -X importtime for the CLI module, and for each library of WATCHED that it
        imports (cumulative, where it is first imported: they overlap)."""
        # cwd: not a repository (``-c`` puts the working folder first on the path)
        done = subprocess.run([self.python, "-X", "importtime", "-c", "import kernelcup.adapters.terminal.cli"],
                              capture_output=True, text=True, env=self.env(self.work), cwd=self.work)
        found: dict[str, float] = {}
        for line in done.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| *(\S+)$", line)
            if match and (match.group(2) in WATCHED or match.group(2) == "kernelcup.adapters.terminal.cli"):
                found.setdefault(match.group(2), int(match.group(1)) / 1e6)
        return {"kernelcup.adapters.terminal.cli": found.pop("kernelcup.adapters.terminal.cli", 0.0),
                **{name: found.get(name, 0.0) for name in WATCHED}}

def report(benches: list[Bench], rows: dict[str, dict[str, list[float]]],
           breakdowns: dict[str, list[dict[str, float]]]) -> str:
    this = benches[-1]
    lines = [f"### CLI latency, {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}", "",
             f"leaderboard `{this.name}` ({this.folder}), solution `{this.solution.name}`, {machine()}", ""]
    for bench in benches:
        lines.append(f"- {bench.label}: {bench.python} running {bench.repo}; interpreter start "
                     f"(`python -c pass`) {bench.interpreter_start():.3f} s; `-X importtime` of the CLI module, s "
                     "(each library where it is first imported; 0: not imported): "
                     + ", ".join(f"{k} {v:.3f}" for k, v in bench.import_time().items()))
    labels = [b.label for b in benches]
    lines += ["", "| what | " + " | ".join(f"{label}: median s (runs)" for label in labels) + " |",
              "| --- |" + " --- |" * len(labels)]
    for what, by_label in rows.items():
        cells = []
        for label in labels:
            times = by_label.get(label, [])
            cells.append(f"{statistics.median(times):.2f} ({', '.join(f'{t:.2f}' for t in times)})" if times else "-")
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    lines += ["", "Breakdown of `submit test` (fresh database), median of the runs, from the CLI's log:", "",
              "| phase | " + " | ".join(labels) + " |", "| --- |" + " --- |" * len(labels)]
    for phase in breakdowns[labels[-1]][0] if breakdowns[labels[-1]] else []:
        cells = [f"{statistics.median([b[phase] for b in breakdowns[label]]):.2f}" if breakdowns[label] else "-"
                 for label in labels]
        lines.append(f"| {phase} | " + " | ".join(cells) + " |")
    served = [b for b in breakdowns.get("the server's job", []) if b]
    if served:
        lines += ["", "The server's job for a handed-off `submit test` (its stored phases, median of the runs; "
                  "a standby harness has started the submission's process before the order comes):", "",
                  "| phase | s |", "| --- | --- |"]
        for phase in served[0]:
            lines.append(f"| {phase} | {statistics.median([b.get(phase, 0.0) for b in served]):.2f} |")
    return "\n".join(lines)


def log_breakdown(log: Path, launched_at: float, elapsed: float) -> dict[str, float]:
    """Phases of one submit: from the launch (the bench's wall clock) to each event of its log,
    and from the job's end to the process's."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    stamps = {e["event"]: datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp() for e in events}
    marks = [("until the harness process is started (interpreter, CLI imports, settings)", "harness started"),
             ("until the job starts (store, schema check, sync, submission row, claim)", "job started"),
             ("the job: harness running (torch import left, tests, result)", "job finished")]
    out: dict[str, float] = {}
    previous = launched_at
    for label, event in marks:
        at = stamps.get(event, previous)
        out[label] = max(0.0, at - previous)
        previous = max(previous, at)
    out["rendering the report and ending the process"] = max(0.0, launched_at + elapsed - previous)
    return out


def harness_phases(database: Path) -> dict[str, float]:
    """The harness's own phases of the newest run (its result's ``phases_s``), for the breakdown:
    what of "the job" went to the submission's process, the tests and the closing. Empty where
    the database or the field is missing (a kernelcup from before it)."""
    import sqlite3

    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
            row = db.execute("SELECT result_json FROM run ORDER BY id DESC LIMIT 1").fetchone()
    except sqlite3.Error:
        return {}
    phases = json.loads(row[0]).get("phases_s", {}) if row else {}
    names = {
        "ready": "… of which the harness until the submission's process was ready (start-up where no standby, "
        "loading the submission)",
        "process start-up": "… … of which that process's own start (interpreter, torch, the GPU)",
        "submission load": "… … of which that process importing the problem and the submission",
        "tests": "… of which the tests",
        "first test": "… … of which the first test (first-call compiles)",
        "closing": "… of which closing (processes, sandbox, build caches)",
        "ending the processes": "… … of which ending the submission's process",
        "sandbox and build caches": "… … of which the sandbox and copying the build caches back",
    }
    return {label: float(phases[key]) for key, label in names.items() if isinstance(phases.get(key), int | float)}


def timed(command: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    return time.perf_counter() - began


def board_name(folder: Path) -> str:
    """The leaderboard name kernelcup gives ``folder`` (GPU MODE's sets name theirs)."""
    sys.path.insert(0, str(REPO))
    try:
        import yaml  # noqa: F401
    except ImportError:  # a GPU image without PyYAML: the subset task.yml uses
        sys.path.insert(0, str(REPO / "bench" / "gpu"))
        import taskyml

        sys.modules["yaml"] = taskyml
    from kernelcup.core.leaderboards.problem_sets import find_task_folders

    found, _ = find_task_folders(folder.parent)
    for entry in found:
        if entry.folder.resolve() == folder:
            return entry.name
    raise SystemExit(f"{folder} is no leaderboard folder (no task.yml kernelcup can read)")


def installed(python: str) -> bool:
    probe = "import importlib.metadata as m, sys; sys.exit(0 if m.entry_points(group='kernelcup.runners') else 1)"
    return subprocess.run([python, "-c", probe], capture_output=True).returncode == 0


def entry_points_folder(where: Path) -> Path:
    """A folder holding a ``kernelcup`` distribution's metadata with the entry points of
    pyproject.toml, for an interpreter that has the repository on its path but not installed."""
    project: dict[str, Any] = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    info = where / f"kernelcup-{project['version']}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: kernelcup\nVersion: {project['version']}\n")
    groups = project.get("entry-points", {})
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in entries.items()) + "\n"
        for group, entries in groups.items()))
    return where


def machine() -> str:
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        gpu = []
    cpus = os.cpu_count()
    bytecode = "bytecode compiled ahead" + (
        "; PYTHONDONTWRITEBYTECODE is set" if os.environ.get("PYTHONDONTWRITEBYTECODE") else ""
    )
    return f"{gpu[0] if gpu else 'no GPU'}, {cpus} CPUs, load {os.getloadavg()[0]:.1f} at the start, {bytecode}"


if __name__ == "__main__":
    sys.exit(main())
