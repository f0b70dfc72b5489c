#!/usr/bin/env bash
# `pip install kernelcup` as someone who does not clone would: build the wheel, install it with no
# extras into a fresh venv (torch CPU first), run the embedded default (list, submit test, serve)
# and check the exit codes README documents, no "Traceback" and no "Exception ignored". Then each
# extra alone, in a venv layered over the base one (a .pth file: torch is not installed again),
# and the CLI on Python 3.12 and 3.13 where found (without torch: no CPU build of torch 2.13.0 for
# them is on this machine, so there the job fails, cleanly, and the event loop must close clean).
# Usage: tests/install/check_wheel.sh [python3.11]   (from .ci/run, beside make test)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PYTHON="${1:-python3}"
WORK="$(mktemp -d -t kernelcup-wheel-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
[ -n "${KEEP_WORK:-}" ] && trap - EXIT
SOLUTIONS="$ROOT/leaderboards/vectoradd/solutions"
FAILED=0
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 COLUMNS=200

say() { printf '%s\n' "check_wheel: $*"; }
fail() { say "FAIL: $*"; FAILED=1; }

# expect CODE NAME COMMAND...: run COMMAND in a fresh folder, keep its output in $OUT, check its
# exit code and that nothing in it (or in the command log) is a traceback.
expect() {
    local code="$1" name="$2"; shift 2
    local dir="$WORK/runs/$name"
    mkdir -p "$dir"
    local got=0
    (cd "$dir" && "$@" >"$dir/out" 2>&1) || got=$?
    OUT="$(cat "$dir/out")"
    LOG="$(cat "$dir/var/kernelcup.log" 2>/dev/null || true)"
    if [ "$got" != "$code" ]; then fail "$name: exit $got, expected $code"; printf '%s\n' "$OUT" | tail -20; fi
    # kernelcup's own: Python's (at a line's start) or Rich's (in a box's top); a job's error
    # file shown inside a panel is the submission's, not kernelcup's.
    if grep -q -E -e "^Traceback" -e "─ Traceback" -e "Exception ignored" <<<"$OUT$LOG"; then
        fail "$name: a traceback"; printf '%s\n' "$OUT" | tail -30
    fi
}
# serve_then_stop PATTERN COMMAND...: run a server until its output shows PATTERN, waiting as long
# as the box needs (a loaded CI box can take minutes; at most 600 s), then stop it with SIGINT as
# a user would, print its output and exit with its status. `timeout` starts it: a command started
# in the background of a script ignores SIGINT, and timeout passes the signal on to a server that
# does not.
serve_then_stop() {
    local pattern="$1" log waited=0 code=0 pid
    shift
    log="$(mktemp)"
    PYTHONUNBUFFERED=1 timeout --preserve-status -s INT 600 "$@" >"$log" 2>&1 &
    pid=$!
    while ! grep -qF -- "$pattern" "$log" && kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 6000 ]; do
        sleep 0.1
        waited=$((waited + 1))
    done
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" || code=$?
    cat "$log"
    rm -f "$log"
    return "$code"
}
contains() {  # contains NAME TEXT PATTERN
    grep -qF -- "$3" <<<"$2" || fail "$1: expected '$3'"
}
lacks() {
    if grep -qF -- "$3" <<<"$2"; then fail "$1: did not expect '$3'"; fi
}
count() {  # count NAME TEXT PATTERN N
    local n; n="$(grep -cF -- "$3" <<<"$2" || true)"
    [ "$n" = "$4" ] || fail "$1: '$3' appears $n times, expected $4"
}

start=$SECONDS
say "building the wheel"
# From a copy of the checkout (its tracked and untracked, not ignored files): setuptools builds in
# the source tree, writing build/ and kernelcup.egg-info (the metadata the tests' importlib reads),
# and .ci/run runs the tests beside this script.
mkdir "$WORK/src"
git -C "$ROOT" ls-files -z --cached --others --exclude-standard \
    | tar -C "$ROOT" --null --ignore-failed-read --warning=no-failed-read -T - -cf - | tar -C "$WORK/src" -xf -
"$PYTHON" -m pip wheel -q --no-deps -w "$WORK/dist" "$WORK/src" >/dev/null
WHEEL="$(ls "$WORK"/dist/kernelcup-*.whl)"

say "base install: torch==2.13.0, then the wheel with no extras"
"$PYTHON" -m venv "$WORK/base"
"$WORK/base/bin/pip" install -q torch==2.13.0 2>&1 | grep -v "^WARNING" || true
"$WORK/base/bin/pip" install -q "$WHEEL" 2>&1 | grep -v "^WARNING" || true
KC="$WORK/base/bin/kernelcup"
export KERNELCUP_LEADERBOARDS_DIR="$ROOT/leaderboards"

db() { printf 'sqlite:///%s/%s.db' "$WORK" "$1"; }

expect 0 base-list env KERNELCUP_DATABASE_URL="$(db base)" "$KC" list
contains base-list "$OUT" vectoradd
count base-list "$LOG" "runner modal is off: pip install 'kernelcup[modal]' turns it on" 1
# No clone: `kernelcup init` writes the leaderboards the wheel carries, and `list` in that folder
# shows them (its own leaderboards/, config/ and var/; not the checkout's KERNELCUP_LEADERBOARDS_DIR).
expect 0 base-init "$KC" init "$WORK/runs/base-init-list"
contains base-init "$OUT" "kernelcup list"
expect 0 base-init-list env -u KERNELCUP_LEADERBOARDS_DIR "$KC" list
contains base-init-list "$OUT" vectoradd
contains base-init-list "$OUT" vectoradd_cuda
lacks base-init-list "$OUT" "Not loaded"
expect 1 base-init-again "$KC" init "$WORK/runs/base-init-list"
contains base-init-again "$OUT" "--force"
expect 0 base-submit env KERNELCUP_DATABASE_URL="$(db base)" KERNELCUP_RUNNERS__LOCAL__STANDBY=1 \
    "$KC" submit test "$SOLUTIONS/pytorch.py"
contains base-submit "$OUT" "all 5 tests passed"
expect 1 base-submit-wrong env KERNELCUP_DATABASE_URL="$(db base)" "$KC" submit test "$SOLUTIONS/wrong_offbyone.py"
expect 1 base-unknown-leaderboard env KERNELCUP_DATABASE_URL="$(db base)" "$KC" show nosuch
contains base-unknown-leaderboard "$OUT" "There is no leaderboard 'nosuch'"
expect 2 base-bad-option env KERNELCUP_DATABASE_URL="$(db base)" "$KC" list --nosuch
expect 4 base-bad-setting env KERNELCUP_DATABASE_URL="$(db base)" KERNELCUP_LIMITS__MAX_FILE_BYTES=lots "$KC" list
contains base-bad-setting "$OUT" "limits.max_file_bytes must be a whole number"
expect 4 base-postgres env KERNELCUP_DATABASE_URL=postgresql://kc@127.0.0.1:1/kc "$KC" list
contains base-postgres "$OUT" "pip install 'kernelcup[postgres]'"
expect 4 base-remote env KERNELCUP_DATABASE_URL="$(db base)" "$KC" --server http://127.0.0.1:1 list
contains base-remote "$OUT" "pip install 'kernelcup[remote]'"
expect 0 base-serve serve_then_stop '"event": "serving"' env KERNELCUP_DATABASE_URL="$(db base)" \
    "$KC" serve --no-console
contains base-serve "$OUT" '"event": "serving"'
count base-serve "$OUT" "adapter web is off: pip install 'kernelcup[web]' turns it on" 1
count base-serve "$OUT" "runner modal is off" 1
expect 4 base-discord-sync env DISCORD_TOKEN=x "$WORK/base/bin/python" -m kernelcup.adapters.discord sync-commands
contains base-discord-sync "$OUT" "pip install 'kernelcup[discord]'"
say "base install checked in $((SECONDS - start)) s"

# extra NAME: a venv that sees the base one's packages and adds only what kernelcup[NAME] needs.
extra() {
    local name="$1" venv="$WORK/extra-$1"
    "$PYTHON" -m venv "$venv"
    "$WORK/base/bin/python" -c "import site; print(site.getsitepackages()[0])" \
        >"$("$venv/bin/python" -c "import site; print(site.getsitepackages()[0])")/kernelcup-base.pth"
    "$venv/bin/pip" install -q --find-links "$WORK/dist" "kernelcup[$name]==$(basename "$WHEEL" | cut -d- -f2)" \
        2>&1 | grep -v "^WARNING" || true
    PY="$venv/bin/python"
}

extra discord
expect 0 discord-list env KERNELCUP_DATABASE_URL="$(db discord)" "$PY" -m kernelcup.adapters.terminal list
expect 0 discord-import "$PY" -c "import kernelcup.adapters.discord.adapter"
extra slack
expect 0 slack-import "$PY" -c "import kernelcup.adapters.slack.adapter"
extra modal
# The shipped Modal GPUs alone ask for nothing; a GPU the operator routes to Modal without
# credentials is warned about (tests/terminal/test_quiet_serve.py).
expect 0 modal-list env KERNELCUP_DATABASE_URL="$(db modal)" KERNELCUP_GPUS__H100__RUNNER=modal \
    "$PY" -m kernelcup.adapters.terminal list
lacks modal-list "$LOG" "runner modal is off"
contains modal-list "$LOG" "Modal GPUs not served here: no Modal credentials"
extra github
expect 0 github-list env KERNELCUP_DATABASE_URL="$(db github)" KERNELCUP_GPUS__RTX4090__RUNNER=github \
    "$PY" -m kernelcup.adapters.terminal list
lacks github-list "$LOG" "runner github is off"
contains github-list "$LOG" "GitHub GPUs not served here"
extra web
expect 0 web-serve serve_then_stop "web: serving" env KERNELCUP_DATABASE_URL="$(db web)" KERNELCUP_WEB__PORT=0 \
    "$PY" -m kernelcup.adapters.terminal serve --no-console
contains web-serve "$OUT" "web: serving"
lacks web-serve "$OUT" "adapter web is off"
extra remote
expect 3 remote-unreachable env KERNELCUP_DATABASE_URL="$(db remote)" "$PY" -m kernelcup.adapters.terminal \
    --server http://127.0.0.1:1 list
extra postgres
expect 3 postgres-unreachable env KERNELCUP_DATABASE_URL=postgresql://kc@127.0.0.1:1/kc "$PY" -m kernelcup.adapters.terminal list
say "each extra checked; $((SECONDS - start)) s so far"

# A copy found only through PYTHONPATH, the way `pip install --target` or `--user` with `python -s`
# leaves it: no process of a job may rely on kernelcup being in the interpreter's own site-packages.
# A multi-GPU job (on the CPU, two ranks over gloo) starts the most kinds of process.
"$WORK/base/bin/pip" uninstall -q -y kernelcup 2>&1 | grep -v "^WARNING" || true
"$WORK/base/bin/pip" install -q --no-deps --target "$WORK/target" "$WHEEL" 2>&1 | grep -v "^WARNING" || true
expect 0 target-multi-gpu env KERNELCUP_DATABASE_URL="$(db target)" PYTHONPATH="$WORK/target" \
    "$WORK/base/bin/python" -s -m kernelcup.adapters.terminal submit test --leaderboard allreduce \
    "$ROOT/leaderboards/allreduce/solutions/all_reduce.py"
contains target-multi-gpu "$OUT" "tests passed"
say "the copy on PYTHONPATH ran a multi-GPU job; $((SECONDS - start)) s so far"

# Every other supported Python: the wheel without torch (no CPU build of torch 2.13.0 for them
# is on this machine), so the job fails, cleanly, and the event loop must close clean.
for version in 3.12 3.13; do
    other=""
    for candidate in $(ls -d /root/.pyenv/versions/$version*/bin/python$version 2>/dev/null) \
            "$(command -v python$version || true)"; do
        if [ -n "$candidate" ] && "$candidate" -c "pass" 2>/dev/null; then other="$candidate"; break; fi
    done
    if [ -z "$other" ]; then
        say "no Python $version here: its check is skipped"
        continue
    fi
    tag="py${version/./}"
    say "Python $version ($other): the wheel without torch"
    "$other" -m venv "$WORK/$tag"
    # The base requirements but torch, from the wheel's own metadata.
    "$WORK/$tag/bin/python" - "$WHEEL" >"$WORK/$tag-requirements.txt" <<'EOF'
import sys, zipfile
from email.parser import Parser
with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(wheel.read(name).decode())
for requirement in metadata.get_all("Requires-Dist") or []:
    if "extra ==" not in requirement and not requirement.startswith("torch"):
        print(requirement)
EOF
    "$WORK/$tag/bin/pip" install -q -r "$WORK/$tag-requirements.txt" 2>&1 | grep -v "^WARNING" || true
    "$WORK/$tag/bin/pip" install -q --no-deps "$WHEEL" 2>&1 | grep -v "^WARNING" || true
    expect 0 "$tag-list" env KERNELCUP_DATABASE_URL="$(db "$tag")" "$WORK/$tag/bin/kernelcup" list
    expect 1 "$tag-submit" env KERNELCUP_DATABASE_URL="$(db "$tag")" KERNELCUP_RUNNERS__LOCAL__STANDBY=1 \
        "$WORK/$tag/bin/kernelcup" submit test "$SOLUTIONS/pytorch.py"
    contains "$tag-submit" "$OUT" "No module named 'torch'"
done

say "done in $((SECONDS - start)) s"
exit "$FAILED"
