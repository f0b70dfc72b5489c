"""Where the seconds of a terminal command go (issue #14): `kernelcup list` and `kernelcup submit
test` cold (a new process; a fresh database, then an existing one), and `submit test` handed to a
running `kernelcup serve`, with the server's own time for it (the bot's warm path).

    python bench/cli_latency.py [--leaderboard FOLDER] [--solution FILE] [--runs 5] [--out FILE]

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
(timestamps of harness start, job start and end) and from ``-X importtime``.
"""

from __future__ import annotations

import argparse
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
    parser.add_argument("--no-serve", action="store_true", help="skip the runs beside a server (for a "
                        "kernelcup older than the hand-off: a before/after comparison)")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) here")
    options = parser.parse_args()
    folder = options.leaderboard.resolve()
    solution = (options.solution or folder / "solutions" / "pytorch.py").resolve()
    bench = Bench(options.python, folder, solution, options.serve_standby)
    missing = bench.missing_modules()
    if missing:
        print(f"{options.python} cannot import {', '.join(missing)}: install the core's packages first "
              "(bench/gpu/wheels.sh makes the wheels; its header says how).", file=sys.stderr)
        return 2
    try:
        report = bench.run(options.runs, options.pause_s, serve=not options.no_serve)
    finally:
        bench.close()
    print(report)
    if options.out:
        options.out.write_text(report + "\n")
    return 0


class Bench:
    def __init__(self, python: str, folder: Path, solution: Path, serve_standby: str) -> None:
        self.python = python
        self.folder = folder
        self.solution = solution
        self.serve_standby = serve_standby
        # Short: the server's unix socket lives here, and its path has room for ~100 characters.
        self.work = Path(tempfile.mkdtemp(prefix="kcbench", dir="/tmp"))
        self.cache = self.work / "cache"
        self.name = board_name(folder)
        self.pythonpath = [str(REPO)]
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
        began = time.perf_counter()
        done = subprocess.run([self.python, "-m", "adapters.terminal", *args], cwd=home, env=self.env(home),
                              capture_output=True, text=True, timeout=600)
        elapsed = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"kernelcup {' '.join(args)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return elapsed, done

    def submit(self, home: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
        return self.cli(home, "submit", "test", str(self.solution), "--leaderboard", self.name)

    def run(self, runs: int, pause_s: float, serve: bool = True) -> str:
        shutil.rmtree(self.cache, ignore_errors=True)
        rows: list[tuple[str, list[float], str]] = []
        base = self.interpreter_start()
        imports = self.import_time()

        fresh_lists = [self.cli(self.work / f"list{i}", "list")[0] for i in range(runs)]
        again = self.work / "list0"
        lists = [self.cli(again, "list")[0] for _ in range(runs)]
        rows.append(("`list`, fresh database (migrations, first sync)", fresh_lists, ""))
        rows.append(("`list`, existing database", lists, ""))

        first, _ = self.submit(self.work / "first")  # compiles: the build cache was emptied
        fresh, breakdowns = [], []
        for i in range(runs):
            home = self.work / f"submit{i}"
            elapsed, _ = self.submit(home)
            fresh.append(elapsed)
            breakdowns.append(log_breakdown(home / "var" / "kernelcup.log", elapsed))
        existing = [self.submit(self.work / "submit0")[0] for _ in range(runs)]
        rows.append(("`submit test`, first run of this source (fresh database; builds compile)", [first], ""))
        rows.append(("`submit test`, fresh database, source built before", fresh, ""))
        rows.append(("`submit test`, existing database, source built before", existing, ""))

        beside, server_s = self.beside_server(runs, pause_s) if serve else ([], [])
        rows.append(("`submit test` beside a running `kernelcup serve` (handed to it)", beside, ""))
        rows.append(("the server's own time for it (order to report: the bot's warm path)", server_s, ""))
        return self.report(rows, base, imports, breakdowns)

    def beside_server(self, runs: int, pause_s: float) -> tuple[list[float], list[float]]:
        home = self.work / "served"
        home.mkdir()
        log = (home / "serve.log").open("w")
        server = subprocess.Popen([self.python, "-m", "adapters.terminal", "serve", "--no-console"], cwd=home,
                                  env=self.env(home, KERNELCUP_RUNNERS__LOCAL__STANDBY=self.serve_standby),
                                  stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 300
            while not (home / "var" / "kernelcup.sock").exists():
                if server.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("kernelcup serve did not open its socket:\n" + (home / "serve.log").read_text())
                time.sleep(0.1)
            time.sleep(pause_s)  # its first standby harness
            self.submit(home)  # one unmeasured: the server's first job warms what it warms
            times = []
            for _ in range(runs):
                time.sleep(pause_s)
                times.append(self.submit(home)[0])
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=120)
            log.close()
        said = [json.loads(line) for line in (home / "serve.log").read_text().splitlines() if line.startswith("{")]
        handed = [e for e in said if e.get("event") == "hand-off command"]
        if len(handed) != runs + 1:
            raise SystemExit(f"expected {runs + 1} hand-offs in the server's log, found {len(handed)}")
        done = [float(e["elapsed_s"]) for e in said if e.get("event") == "hand-off submission done"]
        return times, done[1:]

    def interpreter_start(self) -> float:
        return statistics.median(timed([self.python, "-c", "pass"], self.env(self.work)) for _ in range(5))

    def import_time(self) -> dict[str, float]:
        """Seconds of -X importtime for the CLI module, and for each library of WATCHED that it
        imports (cumulative, where it is first imported: they overlap)."""
        done = subprocess.run([self.python, "-X", "importtime", "-c", "import adapters.terminal.cli"],
                              capture_output=True, text=True, env=self.env(self.work))
        found: dict[str, float] = {}
        for line in done.stderr.splitlines():
            match = re.match(r"import time:\s+\d+ \|\s+(\d+) \| *(\S+)$", line)
            if match and (match.group(2) in WATCHED or match.group(2) == "adapters.terminal.cli"):
                found.setdefault(match.group(2), int(match.group(1)) / 1e6)
        return {"adapters.terminal.cli": found.pop("adapters.terminal.cli", 0.0),
                **{name: found.get(name, 0.0) for name in WATCHED}}

    def report(self, rows: list[tuple[str, list[float], str]], base: float, imports: dict[str, float],
               breakdowns: list[dict[str, float]]) -> str:
        lines = [f"### CLI latency, {datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
                 "", f"leaderboard `{self.name}` ({self.folder}), solution `{self.solution.name}`, "
                 f"python {self.python}, {machine()}", "",
                 "| what | median s | runs (s) |", "| --- | --- | --- |"]
        for what, times, _ in rows:
            shown = ", ".join(f"{t:.2f}" for t in times)
            lines.append(f"| {what} | {statistics.median(times):.2f} | {shown} |" if times else f"| {what} | - | |")
        lines += ["", f"Interpreter start (`python -c pass`): {base:.3f} s. `-X importtime` of the CLI module, "
                  "seconds (each library where it is first imported; they overlap; 0: not imported):", ""]
        lines += [f"- {name}: {seconds:.3f}" for name, seconds in imports.items()]
        if breakdowns:
            lines += ["", "Breakdown of `submit test` (fresh database), median of the runs, from the CLI's log:", "",
                      "| phase | s |", "| --- | --- |"]
            for phase in breakdowns[0]:
                values = [b[phase] for b in breakdowns if phase in b]
                lines.append(f"| {phase} | {statistics.median(values):.2f} |")
        return "\n".join(lines)


def log_breakdown(log: Path, elapsed: float) -> dict[str, float]:
    """Phases of one submit from its JSON log: the process's start is the log's first line minus
    nothing we can know, so phases are measured back from the end (the process's wall time)."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    stamps = {e["event"]: datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp() for e in events}
    end = max(stamps.values())
    start = end - elapsed  # the last line is written just before the process exits
    marks = [("until the harness process is started (interpreter, CLI imports, settings)", "harness started"),
             ("until the job starts (store, schema check, sync, submission row, claim)", "job started"),
             ("the job: harness running (torch import left, tests, result)", "job finished"),
             ("rendering the report and ending the process", None)]
    out: dict[str, float] = {}
    previous = start
    for label, event in marks:
        at = stamps.get(event, previous) if event else start + elapsed
        out[label] = max(0.0, at - previous)
        previous = max(previous, at)
    return out


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
    from core.problem_sets import find_task_folders

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
    return f"{gpu[0] if gpu else 'no GPU'}, {cpus} CPUs, load {os.getloadavg()[0]:.1f} at the start"


if __name__ == "__main__":
    sys.exit(main())
