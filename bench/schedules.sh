#!/usr/bin/env bash
# Every schedule at pp=2 on this machine: measured step time and bubble (from the executor's
# own timing, averaged over ranks) next to the analytic bubble of the generated schedule.
# usage: bench/schedules.sh [BUILD_DIR] [STEPS]
set -euo pipefail
build=${1:-build}
steps=${2:-12}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=${LOOM_BENCH_OUT:-bench/out/schedules}
mkdir -p "$out"
m=4
printf "%-12s %5s %5s %10s %14s %16s\n" schedule loops m step_ms bubble_measured bubble_analytic
for spec in "gpipe 1" "1f1b 1" "interleaved 2" "bfs 2" "zb-h1 1"; do
  read -r sched loops <<<"$spec"
  "$build/bin/loom" train --nproc 2 --model.kind gpt --width 128 --layers 6 --heads 4 --seq_len 64 \
    --data.kind synthetic --global_batch 32 --microbatches $m --pp 2 --loops "$loops" \
    --schedule "$sched" --steps "$steps" --eval_batches 1 --output.dir "$out/$sched" --overwrite \
    --output.trace "$out/$sched/timeline.json" --progress false >/dev/null 2>&1
  "$build/bin/loom" schedule --schedule "$sched" --pp 2 --loops "$loops" --microbatches $m \
    --format svg --out "$out/$sched/schedule.svg" 2>/dev/null
  analytic=$("$build/bin/loom" schedule --schedule "$sched" --pp 2 --loops "$loops" \
    --microbatches $m --format ascii | awk -F': ' '/bubble fraction/ {print $2}')
  python3 - "$out/$sched/metrics.jsonl" "$sched" "$loops" "$m" "$analytic" <<'PY'
import json, sys, statistics
rows = [r for r in map(json.loads, open(sys.argv[1])) if 'bubble' in r][2:]
step = statistics.median(r["step_s"] for r in rows) * 1000
bub = statistics.median(r["bubble"] for r in rows)
print(f"{sys.argv[2]:<12} {sys.argv[3]:>5} {sys.argv[4]:>5} {step:10.1f} {bub:14.3f} {float(sys.argv[5]):16.3f}")
PY
done
echo "pictures: $out/<schedule>/schedule.svg (generated) and timeline.svg (measured, last step)"
