#!/bin/bash
# Ranked pairs with a job on every GPU of the machine at once, as a machine of several GPUs runs
# them: the boards are dealt out to the GPUs in turn, and each GPU runs its own
#   run_all.py --repeat-only --sections ranked --repeat-set --boards <its share>
# with CUDA_VISIBLE_DEVICES set to it, its own build cache and its own $OUT/g<N>.
#
#   OUT=... [B=budget_s] [BOARDS=a,b,c] [GPUS=n] [FIRST=k] [TRACE=1] [EXTRA=n] bash bench/gpu/pairs.sh
# (FIRST: the first GPU dealt to; those below it are left for other work. TRACE=1: every case's
# calls to $OUT/g<N>.trace.jsonl, harness/benchmark.py's KERNELCUP_HARNESS_TRACE. EXTRA=n: n more
# jobs of each board after its pair, with the GPU's state in a drift table: run_all.py --extra-jobs)
#
# From the repository root, on the GPU machine, after the wheels of bench/gpu/wheels.sh are on
# PYTHONPATH (run_all.py's header). BOARDS defaults to every shipped and repeat-set board.
set -u
OUT=${OUT:-./gpu-out}
B=${B:-400}
GPUS=${GPUS:-$(nvidia-smi -L | wc -l)}
FIRST=${FIRST:-0}
ALL="conv2d,grayscale,histogram,identity,matmul,prefixsum,softmax,vectoradd,vectoradd_cuda,vectorsum"
ALL="$ALL,bincount_sync,item_normalize,launches,pylist_weights,scatter_atomics,tiny_add,compiled_sort,graph_launches"
IFS=, read -r -a boards <<< "${BOARDS:-$ALL}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv; nproc
for ((g = FIRST; g < GPUS; g++)); do
  share=""
  for ((i = g - FIRST; i < ${#boards[@]}; i += GPUS - FIRST)); do share="$share${share:+,}${boards[i]}"; done
  [ -n "$share" ] || continue
  env ${TRACE:+KERNELCUP_HARNESS_TRACE=$OUT/g$g.trace.jsonl} CUDA_VISIBLE_DEVICES=$g KERNELCUP_CACHE_DIR=/tmp/kc-cache-$g OUT=$OUT/g$g \
    python3 bench/gpu/run_all.py --repeat-only --sections ranked --repeat-set --budget-s "$B" --boards "$share" ${EXTRA:+--extra-jobs "$EXTRA"} \
    > "$OUT/g$g.log" 2>&1 &
done
wait
for ((g = FIRST; g < GPUS; g++)); do
  echo "=== GPU $g"
  sed -n '/## repeatability/,/## notes/p' "$OUT/g$g/gpu_report.md" 2>/dev/null || tail -20 "$OUT/g$g.log"
done
