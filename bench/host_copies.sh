#!/usr/bin/env bash
# What keeping checkpoints on hosts without a shared run folder costs (docs/multi-host.md,
# "Hosts without a shared folder"): two hosts of the namespace test bed (scripts/hosts.sh), two
# ranks each (pp 2 x dp 2), their link shaped to RATE. The same run twice, ABBA: with one folder
# both hosts see ("shared"), and with each host's folder its own ("private": a bind mount in a
# mount namespace per host), where every save also sends each rank file to the other host.
# Prints each run's wall time, the median of each variant, the extra time per save, and what
# the copies' bytes take at RATE (each host sends its two ranks' files over its link).
# Needs root. usage: bench/host_copies.sh [BUILD_DIR] [RATE|none] [ROUNDS] [SAVES]
set -euo pipefail
build=${1:-build}
rate=${2:-1gbit}
rounds=${3:-2}
saves=${4:-6}
cd "$(dirname "$0")/.."
# shellcheck source=bench/bed_lib.sh
source bench/bed_lib.sh "$build" loomc "$rate"

# A GPT of 14.3M parameters: with AdamW a rank file holds half of them (its pipeline stage)
# with their two moments, about 86 MB.
cfg="$tmp/gpt.toml"
cat >"$cfg" <<TOML
[model]
kind = "gpt"
width = 384
layers = 8
heads = 6
seq_len = 32
vocab = 256
[data]
kind = "synthetic"
synthetic_size = 512
[train]
steps = $((2 * saves))
global_batch = 8
microbatches = 2
optimizer = "adamw"
eval_batches = 1
seed = 1234
[output]
progress = false
checkpoint_every = 2
keep = 1
TOML

# run VARIANT PORT: one run on both hosts; its wall time (seconds) on stdout.
run() {
  local variant=$1 port=$2 k start pids=()
  rm -rf "$tmp/run" "$tmp/h0" "$tmp/h1"
  mkdir -p "$tmp/run" "$tmp/h0" "$tmp/h1"
  start=$(date +%s.%N)
  for k in 0 1; do
    local folder=""
    [[ $variant == private ]] && folder=$tmp/h$k
    on_host "$k" "$folder" "$loom" launch --nproc 2 --nnodes 2 --node-rank "$k" \
      --master-addr "$master" --master-port "$port" -- "$loom" train --config "$cfg" \
      --pp 2 --dp 2 --output.dir "$tmp/run/out" >"$tmp/$variant.$k.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$tmp/$variant".*.log >&2; exit 1; }; done
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)"
}

declare -A times=([shared]="" [private]="")
port=29800
for ((r = 0; r < rounds; r++)); do
  order=(shared private)
  ((r % 2)) && order=(private shared)
  for v in "${order[0]}" "${order[1]}" "${order[1]}" "${order[0]}"; do  # A B B A
    t=$(run "$v" $((port++)))
    times[$v]+="$t "
    echo "round $r $v: $t s" >&2
  done
done
last="out/checkpoint/step-$(printf %06d $((2 * saves)))/manifest.json"  # of the last run
[[ -f $tmp/run/$last ]] || last=../h0/$last
bytes=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['files'][0]['bytes'])" \
  "$tmp/run/$last")
python3 - "$rate" "$saves" "$bytes" "${times[shared]}" "${times[private]}" <<'PY'
import re, statistics, sys
rate, saves, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
shared = [float(x) for x in sys.argv[4].split()]
private = [float(x) for x in sys.argv[5].split()]
m = re.fullmatch(r"(\d+)(k|m|g)bit", rate)
bits = int(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else float("inf")
a, b = statistics.median(shared), statistics.median(private)
per_save = (b - a) / saves
wire = 2 * size * 8 / bits  # two rank files out of each host, both hosts at once
print(f"| rate | saves | rank file | shared (median) | private (median) | extra per save | copies at the rate |")
print(f"|---|---|---|---|---|---|---|")
print(f"| {rate} | {saves} | {size / 1e6:.1f} MB | {a:.2f} s | {b:.2f} s | {per_save:.2f} s | {wire:.2f} s |")
print(f"runs: shared {shared}, private {private}")
PY
