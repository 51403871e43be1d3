#!/usr/bin/env bash
# Breadth-first vs interleaved (depth-first) vs 1F1B for a ~52B GPT (h=8192, 64 layers, 64
# heads, s=2048, V=51200) on 64..512 A100-80GB as the batch per GPU shrinks, without and with
# zero3: the regime of the BFPP paper (Lamy-Poirier 2023). Every point is the best
# configuration `loom plan` finds for that schedule family and dp-mode set (dp x pp x tp with
# tp <= 8, micro-batch size, micro-batches, loops, recomputation; memory <= 80 GB).
# Writes docs/notes/bfpp_study.csv and docs/notes/bfpp_study.svg (docs/notes/planner-validation.md
# shows both).
# usage: bench/bfpp_study.sh [BUILD=build]
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
model="--model gpt --layers 64 --width 8192 --heads 64 --seq-len 2048 --vocab 51200"
cluster=clusters/a100-80gb.toml
csv=docs/notes/bfpp_study.csv
echo "gpus,batch_per_gpu,global_batch,schedule,dp_modes,step_s,model_tflops_per_gpu,bubble,exposed_comm_s,peak_gb,configuration" > "$csv"
for gpus in 64 128 256 512; do
  for bpg in 2 1 0.5 0.25; do
    gb=$(python3 -c "print(int($gpus * $bpg))")
    for sched in 1f1b interleaved bfs; do
      for modes in allreduce,zero1 zero3; do
        line=$("$loom" plan $model --cluster "$cluster" --gpus "$gpus" --global-batch "$gb" \
                 --schedules "$sched" --dp-modes "$modes" --top 1 --time-budget 60s --json || true)
        if [[ -z $line ]]; then
          echo "$gpus,$bpg,$gb,$sched,$modes,,,,,,none fits" >> "$csv"
          continue
        fi
        python3 - "$line" "$gpus" "$bpg" "$gb" "$sched" "$modes" >> "$csv" <<'PY'
import json, sys
r = json.loads(sys.argv[1])
g, bpg, gb, sched, modes = sys.argv[2:7]
print(f"{g},{bpg},{gb},{sched},{modes.replace(',', '+')},{r['step_s']:.4g},"
      f"{r['model_tflops_per_device']:.4g},{r['bubble']:.4g},{r['exposed_comm_s']:.4g},"
      f"{r['peak_bytes'] / 1e9:.4g},{r['configuration']}")
PY
      done
    done
    echo "done: $gpus GPUs, batch per GPU $bpg" >&2
  done
done
python3 bench/bfpp_plot.py "$csv" docs/notes/bfpp_study.svg
echo "wrote $csv and docs/notes/bfpp_study.svg"
