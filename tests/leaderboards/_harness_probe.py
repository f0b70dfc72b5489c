"""Temporary: one job through the real harness per argument (leaderboard/solution mode)."""
import json, subprocess, sys, secrets
from pathlib import Path
import yaml
from harness.spec import JobSpec, Mode, TaskConfig, parse_line

root = Path("leaderboards")
for arg in sys.argv[1:]:
    board, solution, mode = arg.split(":")
    folder = root / board
    task = yaml.safe_load((folder / "task.yml").read_text())
    files, sub_name = {}, ""
    for e in task["files"]:
        if e["source"] == "@SUBMISSION@":
            sub_name = e["name"]; files[sub_name] = (folder / solution).read_text()
        else:
            files[e["name"]] = (folder / e["source"]).resolve().read_text()
    c = task.get("config") or {}
    tc = TaskConfig(lang=task["lang"], sources=c.get("sources", []), include_dirs=c.get("include_dirs", []),
                    defines=c.get("defines") or {}, compile_flags=c.get("compile_flags", []),
                    tests=task["tests"], benchmarks=task["benchmarks"], ranking_by=task["ranking_by"])
    key = secrets.token_hex(16)
    spec = JobSpec(job_id=arg, mode=Mode(mode), task=tc, files=files, submission_name=sub_name,
                   timeout_s=300, secret_seed=12345 if mode == "ranked" else None, result_key=key)
    out = subprocess.run([sys.executable, "-m", "harness"], input=spec.to_json(), capture_output=True, text=True)
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    try:
        r = parse_line(last, key)
        print(arg, "->", r.status, r.verdict)
        for b in r.benchmarks:
            print("   ", b.case, b.median_ns, b.runs, b.message)
        if r.status != "passed":
            print("   ", (r.compile_log or "")[-800:], r.stderr[-800:], r.files.get("harness_traceback.txt", "")[-1500:])
    except Exception as exc:
        print(arg, "-> unparsable", exc, out.stdout[-500:], out.stderr[-1500:])
