#!/usr/bin/env bash
# loom's analytic model against published Megatron-LM throughput (Narayanan et al. 2021,
# Table 1 rows with pipeline parallelism, and the PTD-P rows of Table 2): A100-80GB, mixed
# precision, micro-batch 1, full recomputation, no sequence parallelism (it came later).
# The paper used the interleaved schedule; loops v here are our choice (the table omits them).
# The 1T row is the calibration point of clusters/a100-80gb.toml; the others are checks.
# usage: bench/megatron_points.sh [BUILD=build]
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
# params  layers hidden heads tp pp gpus batch loops published_tflops
rows="39.1 48 8192 64 8 2 512 1536 2 138
76.1 60 10240 80 8 4 1024 1792 3 140
145.6 80 12288 96 8 8 1536 2304 2 148
310.1 96 16384 128 8 16 1920 2160 2 155
529.6 105 20480 128 8 35 2520 2520 3 163
1008 128 25600 160 8 64 3072 3072 2 163
174.6 96 12288 96 8 12 384 1536 2 153
174.6 96 12288 96 8 12 768 1536 2 149
174.6 96 12288 96 8 12 1536 1536 2 141
529.6 105 20480 128 8 35 560 2240 3 171
529.6 105 20480 128 8 35 1120 2240 3 167
529.6 105 20480 128 8 35 2240 2240 3 159"
echo "| params (B) | GPUs | t | p | batch | published TFLOP/s | loom interleaved | err | loom 1f1b | err |"
echo "|---|---|---|---|---|---|---|---|---|---|"
while read -r params l h a tp pp gpus batch v pub; do
  common="--model gpt --layers $l --width $h --heads $a --seq-len 2048 --vocab 51200 \
    --cluster clusters/a100-80gb.toml --gpus $gpus --pp $pp --tp $tp --global-batch $batch \
    --micro-batch-size 1 --recompute full --json"
  il=$("$loom" simulate $common --schedule interleaved --loops "$v")
  fb=$("$loom" simulate $common --schedule 1f1b)
  python3 - "$params" "$gpus" "$tp" "$pp" "$batch" "$pub" "$il" "$fb" <<'PY'
import json, sys
params, gpus, tp, pp, batch, pub = sys.argv[1:7]
il, fb = json.loads(sys.argv[7]), json.loads(sys.argv[8])
pub = float(pub)
e = lambda x: f"{100 * (x - pub) / pub:+.0f}%"
print(f"| {params} | {gpus} | {tp} | {pp} | {batch} | {pub:.0f} | {il['tflops_per_device']:.0f} | "
      f"{e(il['tflops_per_device'])} | {fb['tflops_per_device']:.0f} | {e(fb['tflops_per_device'])} |")
PY
done <<< "$rows"
