#!/bin/bash
# One lease's repeatability run, as the device tool calls it: the core's wheels (bench/gpu/wheels.sh,
# carried as .whl/) installed for this machine's Python, the GPUs' clocks, temperature and power
# logged every 500 ms beside the run, every board's ranked pair on every GPU at once
# (bench/gpu/pairs.sh, traced), then each GPU's report and the clock log under $OUT.
#
#   sh bench/gpu/wheels.sh                      # here, once
#   run(command="B=330 bash bench/gpu/lease.sh", carry=[".whl"])   # on a machine of 4 GPUs: ~300 s
#
# B: each GPU's budget in seconds (pairs.sh); GPUS, BOARDS, FIRST, EXTRA and DEAL pass through.
# Everything but the clock log comes back as $OUT/pairs.tgz; its g<N>.trace.jsonl are what a replay
# of the timing rules reads.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-./gpu-out}
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvidia-smi --query-gpu=timestamp,index,clocks.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
  --format=csv -lms 500 > "$OUT/smi.csv" 2>/dev/null &
logger=$!
trap 'kill "$logger" 2>/dev/null' EXIT
started=$SECONDS
OUT=$OUT/pairs TRACE=1 bash bench/gpu/pairs.sh   # its own wait covers only the GPUs' jobs
echo "lease.sh: pairs done in $((SECONDS - started)) s"
# One archive, not the many files of each GPU's run: the device tool returns few files well.
tar -czf "$OUT/pairs.tgz" -C "$OUT" pairs && rm -rf "$OUT/pairs"
