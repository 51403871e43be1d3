#!/usr/bin/env bash
# Data-parallel modes and pipelines over a REAL shaped link (docs/multi-host.md): two hosts of
# the namespace test bed (scripts/hosts.sh), one rank on each (dp 2 or pp 2 across the link),
# the link shaped to RATE by tbf in both directions. For each mode: the bytes loom counts (the
# summary's sent_bytes of both ranks, from metrics.jsonl: the whole run, evaluation included)
# beside the bytes the kernel counted leaving both hosts' eth0
# (/sys/class/net/eth0/statistics/tx_bytes: TCP/IP headers, the store's rendezvous and the
# launchers' heartbeats included); the step time beside the simulator's predictions (`loom
# simulate` with the profile made into a cluster of one-device nodes whose network is RATE;
# Slim-DP and quantization as LightDp models them, docs/planner.md): from the profile alone,
# and with each rank's compute speed as the run measured it between its steps
# (--output.calibrate_every 2, bench/insitu_cluster.py); the wall time and the loss.
# Needs root. usage: bench/hosts_links.sh [BUILD_DIR] [RATE|none] [STEPS]   (a markdown table)
#   CLUSTER=FILE: the profile to start from (default clusters/this-machine.toml).
set -euo pipefail
build=${1:-build}
rate=${2:-100mbit}
steps=${3:-20}
cd "$(dirname "$0")/.."
# shellcheck source=bench/bed_lib.sh
source bench/bed_lib.sh "$build" loomb "$rate"

# A GPT of 0.87M parameters (3.5 MB of fp32 gradients a step) on synthetic tokens, of the
# block shapes clusters/this-machine.toml holds measured times for.
cfg="$tmp/gpt.toml"
cat >"$cfg" <<TOML
[model]
kind = "gpt"
width = 128
layers = 4
heads = 4
seq_len = 64
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

# The cluster the simulator predicts with: this machine's measured blocks, one rank a node,
# the nodes joined by RATE (unshaped: the file's own network, loom's loopback measurement).
# Where tbf's bucket (scripts/hosts.sh: 1 ms of the rate, at least 16 KiB) is smaller than a
# 64 KiB GSO packet, tbf cuts packets to the 1500-byte MTU as a real NIC sends them: 1448 bytes
# of payload take 1514 on the wire, plus a 66-byte ACK every two segments the other way, so
# the link carries payload at 1448 / 1547 of its rate (the cluster file's efficiency).
cluster="$tmp/cluster.toml"
python3 - "$rate" "${CLUSTER:-clusters/this-machine.toml}" "$cluster" <<'PY'
import re, sys
rate, src, dst = sys.argv[1:]
s = open(src).read().replace("devices = 2", "devices = 1").replace("shared = true", "shared = false")
m = re.fullmatch(r"(\d+)(k|m|g)bit", rate)
if m:
    gbs = int(m[1]) * {"k": 1e3, "m": 1e6, "g": 1e9}[m[2]] / 8 / 1e9
    bucket = max(16384, gbs * 1e9 / 1000)
    efficiency = 1448 / 1547 if bucket < 65536 else 1.0
    s = re.sub(r"\[inter\]\nbandwidth_gbs = [0-9.e+-]+\nefficiency = [0-9.e+-]+",
               f"[inter]\nbandwidth_gbs = {gbs}\nefficiency = {efficiency:.4f}", s)
open(dst, "w").write(s)
PY

tx() { bash "$hosts" exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }
txp() { bash "$hosts" exec "$1" cat /sys/class/net/eth0/statistics/tx_packets; }
# Each mode as the TOML its runs and the simulator read: data parallelism across the link
# (dp 2), or a pipeline across it (pp 2, one stage a host, 4 micro-batches: the pipeline modes
# get `microbatches = 4` in their [train] table).
dp2=$'[parallel]\ndp = 2'
pp2=$'[parallel]\npp = 2'
declare -A modes=(
  [allreduce]="$dp2"$'\ndp_mode = "allreduce"'
  [slim-c0.2-e0.1]="$dp2"$'\ndp_mode = "slim"\n[slim]\ncore = 0.2\nexplore = 0.1'
  [quant-8bit]="$dp2"$'\ndp_mode = "quant"\n[quant]\nbits = 8'
  [quant-2bit]="$dp2"$'\ndp_mode = "quant"\n[quant]\nbits = 2'
  [zero1]="$dp2"$'\ndp_mode = "zero1"'
  [zero2]="$dp2"$'\ndp_mode = "zero2"'
  [zero3]="$dp2"$'\ndp_mode = "zero3"'
  [pp2-1f1b]="$pp2"$'\nschedule = "1f1b"'
  [pp2-bfs-loops2]="$pp2"$'\nschedule = "bfs"\nloops = 2'
)
# MODES="allreduce zero1" runs those only.
read -ra order <<<"${MODES:-allreduce slim-c0.2-e0.1 quant-8bit zero3}"
echo "| mode ($rate link, $steps steps, 2 hosts) | loom bytes | kernel bytes | kernel / loom | kernel packets | (kernel - 66 B a packet) / loom | step s | predicted: profile | predicted: speeds during the run | wall s | eval loss |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
step_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["step_s"])'; }
port=29800
for name in "${order[@]}"; do
  port=$((port + 1))
  before=$(($(tx 0) + $(tx 1))) before_packets=$(($(txp 0) + $(txp 1)))
  t0=$(date +%s.%N)
  mode_cfg="$tmp/$name.toml"
  microbatches=1
  [[ $name == pp2-* ]] && microbatches=4
  { sed "s/^\[train\]\$/[train]\nmicrobatches = $microbatches/" "$cfg"; echo "${modes[$name]}"; } >"$mode_cfg"
  for k in 0 1; do
    bash "$hosts" exec "$k" "$loom" launch --nproc 1 --nnodes 2 --node-rank "$k" \
      --master-addr "$master" --master-port "$port" -- "$loom" train --config "$mode_cfg" \
      --output.dir "$tmp/$name" --output.calibrate_every 2 >"$tmp/$name.$k.log" 2>&1 &
  done
  wait
  t1=$(date +%s.%N)
  after=$(($(tx 0) + $(tx 1))) packets=$(($(txp 0) + $(txp 1) - before_packets))
  predicted=$("$loom" simulate --from-config "$mode_cfg" --cluster "$cluster" --gpus 2 --json | step_of)
  # The same with each rank's speed as the run measured it between steps (one simulation per
  # calibration sample, the median; bench/insitu_cluster.py).
  pp=1 dp=2
  [[ $name == pp2-* ]] && pp=2 dp=1
  python3 bench/insitu_cluster.py "$cluster" "$tmp/$name/metrics.jsonl" "$tmp/insitu.toml" \
    "$pp" "$dp" 1 >/dev/null
  insitu=$(while read -r speeds; do
    "$loom" simulate --from-config "$mode_cfg" --cluster "$tmp/insitu.toml" --gpus 2 \
      --rank-speed "$speeds" --json | step_of
  done <"$tmp/insitu.toml.speeds" | python3 -c 'import statistics, sys; print(statistics.median(float(x) for x in sys.stdin))')
  python3 - "$tmp/$name/metrics.jsonl" "$name" "$((after - before))" "$t0" "$t1" "$steps" "$predicted" "$insitu" "$packets" <<'PY'
import json, sys
path, name, kernel, t0, t1, steps, predicted, insitu, packets = sys.argv[1:]
# The headers by the kernel's own packet count: Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12
# bytes a packet (a pure ACK is nothing else).
payload = int(kernel) - 66 * int(packets)
summary = [json.loads(l) for l in open(path) if '"summary"' in l][-1]
loom = summary["sent_bytes_r0"] + summary["sent_bytes_r1"]  # the whole run, evaluation included
print(f"| {name} | {loom:,} | {int(kernel):,} | {int(kernel) / loom:.3f} | {int(packets):,} | "
      f"{payload / loom:.3f} | "
      f"{summary['step_s']:.3f} | {float(predicted):.3f} | {float(insitu):.3f} | {float(t1) - float(t0):.1f} | {summary.get('eval_loss', float('nan')):.4f} |")
PY
done
