#!/usr/bin/env bash
# Slim-DP vs all-reduce vs quantized all-reduce over a REAL shaped link (docs/multi-host.md):
# two hosts of the namespace test bed (scripts/hosts.sh), one rank on each (dp 2 across the
# link), the link shaped to RATE by tbf in both directions. For each mode: the bytes loom
# counts (dp_bytes_per_step x steps x 2 ranks, from metrics.jsonl) beside the bytes the kernel
# counted leaving both hosts' eth0 (/sys/class/net/eth0/statistics/tx_bytes: TCP/IP headers,
# the store's rendezvous and the launchers' heartbeats included), the wall time and the loss.
# Needs root. usage: bench/hosts_links.sh [BUILD_DIR] [RATE|none] [STEPS]   (a markdown table)
set -euo pipefail
build=${1:-build}
rate=${2:-100mbit}
steps=${3:-20}
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 LOOM_HOSTS_PREFIX=loomb
hosts=scripts/hosts.sh
loom=$PWD/$build/bin/loom
tmp=$(mktemp -d)
trap 'bash "$hosts" down; rm -rf "$tmp"' EXIT
if [[ $rate == none ]]; then bash "$hosts" up 2 >&2; else bash "$hosts" up 2 --rate "$rate" >&2; fi

# A GPT of 0.8M parameters (3.3 MB of fp32 gradients a step) on synthetic tokens.
cfg="$tmp/gpt.toml"
cat >"$cfg" <<TOML
[model]
kind = "gpt"
width = 128
layers = 4
heads = 4
seq_len = 32
[data]
kind = "synthetic"
synthetic_size = 2048
[train]
steps = $steps
global_batch = 16
eval_batches = 4
seed = 1234
[output]
progress = false
TOML

tx() { bash "$hosts" exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }
declare -A modes=(
  [allreduce]="--dp-mode allreduce"
  [slim-c0.2-e0.1]="--dp-mode slim --slim.core 0.2 --slim.explore 0.1"
  [quant-8bit]="--dp-mode quant --quant.bits 8"
)
echo "| mode ($rate link, $steps steps, dp 2 across 2 hosts) | loom bytes | kernel bytes | kernel / loom | step s | wall s | eval loss |"
echo "|---|---:|---:|---:|---:|---:|---:|"
port=29800
for name in allreduce slim-c0.2-e0.1 quant-8bit; do
  port=$((port + 1))
  before=$(($(tx 0) + $(tx 1)))
  t0=$(date +%s.%N)
  for k in 0 1; do
    # shellcheck disable=SC2086 # the mode's flags are words
    bash "$hosts" exec "$k" "$loom" launch --nproc 1 --nnodes 2 --node-rank "$k" \
      --master-addr 10.77.0.10 --master-port "$port" -- "$loom" train --config "$cfg" \
      --dp 2 ${modes[$name]} --output.dir "$tmp/$name" >"$tmp/$name.$k.log" 2>&1 &
  done
  wait
  t1=$(date +%s.%N)
  after=$(($(tx 0) + $(tx 1)))
  python3 - "$tmp/$name/metrics.jsonl" "$name" "$((after - before))" "$t0" "$t1" "$steps" <<'PY'
import json, sys
path, name, kernel, t0, t1, steps = sys.argv[1:]
summary = [json.loads(l) for l in open(path) if '"summary"' in l][-1]
loom = summary["dp_bytes_per_step"] * int(steps) * 2
print(f"| {name} | {loom:,} | {int(kernel):,} | {int(kernel) / loom:.3f} | "
      f"{summary['step_s']:.3f} | {float(t1) - float(t0):.1f} | {summary.get('eval_loss', float('nan')):.4f} |")
PY
done
