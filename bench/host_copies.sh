#!/usr/bin/env bash
# What keeping checkpoints on hosts without a shared run folder costs (docs/multi-host.md,
# "Hosts without a shared folder"), on the namespace test bed (scripts/hosts.sh), each host's
# link shaped to RATE. HOSTS = 2: two ranks a host (pp 2 x dp 2); HOSTS = 3: one rank a host
# (pp 3). The same run with one folder every host sees ("shared") and with each host's folder
# its own ("private": a bind mount in a mount namespace per host), where every save also sends
# each rank file to the next host ("copies1"), and with 3 hosts to the next two
# (`--output.host_copies 2`, "copies2"). Each round runs the variants in a rotated order and
# back (A B C C B A). Prints each run's wall time, the median of each variant, the extra time
# per save against the shared folder, and what the copies' bytes take at RATE (each host sends
# its ranks' files to K hosts over its one link). With ASYNC = async each variant also runs with
# its checkpoints written in the background ("<variant>+async", `--output.async_save true`:
# the copies too), its extra time against "shared+async".
# PERIOD: steps between saves (default 2; the run trains SAVES x PERIOD steps).
# Needs root. usage: bench/host_copies.sh [BUILD_DIR] [RATE|none] [ROUNDS] [SAVES] [HOSTS] [ASYNC]
#   [PERIOD]
set -euo pipefail
build=${1:-build}
rate=${2:-1gbit}
rounds=${3:-2}
saves=${4:-6}
nhosts=${5:-2}
async=${6:-}
period=${7:-2}
cd "$(dirname "$0")/.."
case $nhosts in
  2) nproc=2 layers=8 layout=(--pp 2 --dp 2) variants=(shared copies1) ;;
  3) nproc=1 layers=9 layout=(--pp 3) variants=(shared copies1 copies2) ;;
  *) echo "bench/host_copies.sh: HOSTS is 2 or 3, not '$nhosts'" >&2; exit 2 ;;
esac
if [[ $async == async ]]; then
  for v in "${variants[@]}"; do variants+=("$v+async"); done
fi
# shellcheck source=bench/bed_lib.sh
source bench/bed_lib.sh "$build" loomc "$rate" "$nhosts"

# bench/gpt_checkpoints.toml (14.3M parameters, 8 layers): a rank file of pp 2 holds half of
# them with their two moments, about 86 MB; with 9 layers on pp 3, about 65 MB.
cfg=$PWD/bench/gpt_checkpoints.toml

# run VARIANT PORT: one run on every host; its wall time (seconds) on stdout.
run() {
  local variant=${1%+async} port=$2 k start pids=() copies=()
  rm -rf "$tmp/run" "$tmp"/h[0-9]
  mkdir -p "$tmp/run"
  [[ $variant == copies* ]] && copies=(--output.host_copies "${variant#copies}")
  [[ $1 == *+async ]] && copies+=(--output.async_save true)
  start=$(date +%s.%N)
  for ((k = 0; k < nhosts; k++)); do
    local folder=""
    if [[ $variant != shared ]]; then
      folder=$tmp/h$k
      mkdir -p "$folder"
    fi
    on_host "$k" "$folder" "$loom" launch --nproc "$nproc" --nnodes "$nhosts" --node-rank "$k" \
      --master-addr "$master" --master-port "$port" -- "$loom" train --config "$cfg" \
      --model.layers "$layers" --train.steps $((period * saves)) --output.checkpoint_every "$period" \
      "${layout[@]}" "${copies[@]}" --output.dir "$tmp/run/out" >"$tmp/$variant.$k.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$tmp/$variant".*.log >&2; exit 1; }; done
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)"
}

declare -A times=()
port=29800
nv=${#variants[@]}
for ((r = 0; r < rounds; r++)); do
  order=()
  for ((i = 0; i < nv; i++)); do order+=("${variants[(i + r) % nv]}"); done
  for ((i = nv - 1; i >= 0; i--)); do order+=("${order[i]}"); done
  for v in "${order[@]}"; do
    t=$(run "$v" $((port++)))
    times[$v]+="$t "
    echo "round $r $v: $t s" >&2
  done
done
last="out/checkpoint/step-$(printf %06d $((period * saves)))/manifest.json"  # of the last run
[[ -f $tmp/run/$last ]] || last=../h0/$last
bytes=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['files'][0]['bytes'])" \
  "$tmp/run/$last")
args=()
for v in "${variants[@]}"; do args+=("$v=${times[$v]}"); done
python3 - "$rate" "$saves" "$bytes" "$nhosts" "$nproc" "${args[@]}" <<'PY'
import re, statistics, sys
rate, saves, size, hosts, nproc = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
runs = {v: [float(x) for x in t.split()] for v, t in (a.split("=") for a in sys.argv[6:])}
m = re.fullmatch(r"(\d+)(k|m|g)bit", rate)
bits = int(m.group(1)) * {"k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] if m else float("inf")
shared = {"": statistics.median(runs["shared"])}
if "shared+async" in runs:
    shared["+async"] = statistics.median(runs["shared+async"])
print(f"{hosts} hosts x {nproc} ranks, rank file {size / 1e6:.1f} MB, {saves} saves, link {rate}")
print("| variant | median | extra per save | copies at the rate |")
print("|---|---|---|---|")
for v, t in runs.items():
    base, mode = (v[:-len("+async")], "+async") if v.endswith("+async") else (v, "")
    k = int(base[len("copies"):]) if base.startswith("copies") else 0
    wire = k * nproc * size * 8 / bits  # each host's ranks' files to k hosts, every host at once
    extra = (statistics.median(t) - shared[mode]) / saves
    print(f"| {v} | {statistics.median(t):.2f} s | {extra:.2f} s | {wire:.2f} s |")
print("runs: " + ", ".join(f"{v} {t}" for v, t in runs.items()))
PY
