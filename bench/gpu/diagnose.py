"""Find which isolation layer (if any) breaks the harness on this GPU machine, in seconds.

Runs ``identity/pytorch.py`` in ``test`` mode under each isolation variant, strongest first,
with a hang watchdog; prints what each did (and the stacks of a hang), and writes the first
variant that passes as shell ``export`` lines to ``$OUT/isolation.env`` for run_all.py.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(Path(__file__).resolve().parent)]
from run_all import SHIPPED, spec_for  # noqa: E402

from kernelcup.harness.spec import Mode, Result, SpecError, parse_line  # noqa: E402

VARIANTS: list[tuple[str, dict[str, str]]] = [
    ("default (nobody, user namespace, IPC, non-dumpable)", {}),
    ("no user namespace", {"KERNELCUP_HARNESS_USERNS": "0"}),
    ("no user namespace, no IPC", {"KERNELCUP_HARNESS_USERNS": "0", "KERNELCUP_HARNESS_IPC": "0"}),
    ("root child, no user namespace", {"KERNELCUP_HARNESS_USER": "none", "KERNELCUP_HARNESS_USERNS": "0"}),
    ("root child, no userns, no IPC, dumpable",
     {"KERNELCUP_HARNESS_USER": "none", "KERNELCUP_HARNESS_USERNS": "0", "KERNELCUP_HARNESS_IPC": "0",
      "KERNELCUP_HARNESS_NONDUMPABLE": "0"}),
]


def attempt(env: dict[str, str]) -> tuple[Result | None, float, str]:
    spec = dataclasses.replace(spec_for("identity", SHIPPED / "identity/solutions/pytorch.py", Mode.TEST),
                               timeout_s=30.0)
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "kernelcup.harness"], input=spec.to_json(), capture_output=True,
                              text=True, cwd=REPO, timeout=45,
                              env={**os.environ, "KERNELCUP_HARNESS_WATCHDOG_S": "20", **env})
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return None, time.monotonic() - started, "harness killed after 45 s; stderr:\n" + err[-3000:]
    wall = time.monotonic() - started
    for line in done.stdout.splitlines():
        try:
            parsed = parse_line(line, spec.result_key)
        except SpecError:
            continue
        if isinstance(parsed, Result):
            return parsed, wall, done.stderr[-2000:]
    return None, wall, f"no result (exit {done.returncode}); stderr:\n{done.stderr[-3000:]}"


def main() -> int:
    out = Path(os.environ.get("OUT", "gpu-out"))
    out.mkdir(parents=True, exist_ok=True)
    chosen: dict[str, str] | None = None
    for name, env in VARIANTS:
        result, wall, log = attempt(env)
        status = result.status.value if result else "no result"
        print(f"== {name}: {status} in {wall:.1f} s", flush=True)
        if result is not None:
            print(f"   verdict: {result.verdict}; isolation: {result.system.isolation}")
            if result.status.value != "passed":
                print("   child stderr:", result.stderr[-2500:])
        if log.strip():
            print("   harness stderr:", log[-2500:])
        if result is not None and result.passed:
            chosen = env
            break
    lines = [f"export {k}={v}" for k, v in (chosen or {}).items()]
    (out / "isolation.env").write_text("\n".join(lines) + "\n")
    print("chosen:", chosen)
    return 0 if chosen is not None else 1


if __name__ == "__main__":
    raise SystemExit(main())
