#!/bin/bash
# Ranked pairs with a job on every GPU of the machine at once, as a machine of several GPUs runs
# them: the boards are dealt out to the GPUs (below: DEAL), and each GPU runs its own
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
# Each GPU's share: with DEAL=turn the boards in turn; otherwise (the default) longest pair first,
# each to the GPU with the least so far, by a pair's seconds on an H200 (2026-11-27, thirteenth
# session: its two jobs with their tests and start-ups; a board not listed counts 60 s).
declare -A SECONDS_OF=(
  [compiled_sort]=130 [conv2d]=84 [graph_launches]=80 [pylist_weights]=78 [tiny_add]=72 [bincount_sync]=68
  [item_normalize]=68 [launches]=62 [vectorsum]=62 [histogram]=62 [matmul]=56 [softmax]=52 [vectoradd]=50
  [prefixsum]=44 [grayscale]=42 [identity]=40 [scatter_atomics]=40 [vectoradd_cuda]=24
)
declare -a shares loads
for ((g = FIRST; g < GPUS; g++)); do shares[g]=""; loads[g]=0; done
if [ "${DEAL:-time}" = turn ]; then
  for ((g = FIRST; g < GPUS; g++)); do
    for ((i = g - FIRST; i < ${#boards[@]}; i += GPUS - FIRST)); do shares[g]="${shares[g]}${shares[g]:+,}${boards[i]}"; done
  done
else
  while read -r _ board; do
    least=$FIRST
    for ((g = FIRST; g < GPUS; g++)); do ((loads[g] < loads[least])) && least=$g; done
    shares[least]="${shares[least]}${shares[least]:+,}$board"
    loads[least]=$((loads[least] + ${SECONDS_OF[$board]:-60}))
  done < <(for b in "${boards[@]}"; do echo "${SECONDS_OF[$b]:-60} $b"; done | sort -k1,1nr -k2)
fi
for ((g = FIRST; g < GPUS; g++)); do
  share=${shares[g]}
  [ -n "$share" ] || continue
  estimate=""; ((loads[g])) && estimate=" (~${loads[g]} s on an H200)"
  echo "GPU $g: $share$estimate"
  env ${TRACE:+KERNELCUP_HARNESS_TRACE=$OUT/g$g.trace.jsonl} CUDA_VISIBLE_DEVICES=$g KERNELCUP_CACHE_DIR=/tmp/kc-cache-$g OUT=$OUT/g$g \
    python3 bench/gpu/run_all.py --repeat-only --sections ranked --repeat-set --budget-s "$B" --boards "$share" ${EXTRA:+--extra-jobs "$EXTRA"} \
    > "$OUT/g$g.log" 2>&1 &
done
wait
for ((g = FIRST; g < GPUS; g++)); do
  echo "=== GPU $g"
  sed -n '/## repeatability/,/## notes/p' "$OUT/g$g/gpu_report.md" 2>/dev/null || tail -20 "$OUT/g$g.log"
done
