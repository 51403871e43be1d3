#!/usr/bin/env bash
# Byte and memory accounting of every --dp-mode on one fixed small run, to compare two builds.
#   bench/dp_accounting_compare.sh run BIN DIR      runs BIN (a loom binary) for each mode into DIR/<mode>
#   bench/dp_accounting_compare.sh compare DIR_A DIR_B   prints both and the fields that differ
# Fields: per step dp_step_bytes, dp_step_calls, peak_dp_working_bytes, peak_bytes (allocator);
# summary dp_bytes_per_step, dp_calls_per_step, state_bytes_rK, peak_bytes_rK.
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
here=$(cd "$(dirname "$0")/.." && pwd)
modes="allreduce zero1 zero2 zero3 slim quant"

extract() {  # metrics.jsonl -> one "key value" line per accounted field
  python3 - "$1" <<'PY'
import json, sys
keep = ("dp_step_bytes", "dp_step_calls", "peak_dp_working_bytes", "peak_bytes")
for line in open(sys.argv[1]):
    j = json.loads(line)
    if "summary" in j:
        for k, v in sorted(j.items()):
            if k.startswith(("state_bytes_r", "peak_bytes_r", "dp_bytes_per_step", "dp_calls_per_step")):
                print(f"summary.{k} {v}")
    elif "loss" in j:
        for k in keep:
            print(f"step{j['step']}.{k} {j[k]}")
PY
}

case "${1:-}" in
  run)
    bin=$2 out=$3
    mkdir -p "$out"
    for mode in $modes; do
      rm -rf "$out/$mode"
      mpiexec --oversubscribe -n 4 "$bin" train --config "$here/configs/gpt-fortunes.toml" \
        --dp 2 --pp 2 --schedule bfs --loops 2 --microbatches 2 --global-batch 8 --width 64 \
        --layers 2 --steps 3 --clip 1.0 --eval-batches 1 --dp-mode "$mode" \
        --output.dir "$out/$mode" --progress false > "$out/$mode.log" 2>&1
      extract "$out/$mode/metrics.jsonl" > "$out/$mode.txt"
    done
    ;;
  compare)
    a=$2 b=$3 status=0
    for mode in $modes; do
      if diff -q "$a/$mode.txt" "$b/$mode.txt" > /dev/null; then
        echo "$mode: identical ($(wc -l < "$a/$mode.txt") fields)"
      else
        echo "$mode: differs"
        join "$a/$mode.txt" "$b/$mode.txt" | awk '$2 != $3 { printf "  %-34s %14s -> %14s (%+d)\n", $1, $2, $3, $3 - $2 }'
        status=1
      fi
    done
    exit $status
    ;;
  *) sed -n '2,6p' "$0"; exit 2 ;;
esac
