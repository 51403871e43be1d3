#!/usr/bin/env bash
# Predicted vs measured step time and memory on this machine (docs/planner.md).
#   predicted: loom simulate --from-config configs/gpt-fortunes.toml over the cluster file that
#              `loom profile` writes (measured block times, links, optimizer);
#   measured:  loom train of the same configuration, median step_s of steps 4..N from its
#              metrics.jsonl, and the runtime's own memory accounting (summary line).
# Configurations ("pp dp schedule dp-mode"): every schedule at pp=2 (loops 2 for interleaved
# and bfs), dp=2 with allreduce and zero3 (2 ranks each: one per core here), then pp=2 x dp=2
# (4 ranks time-sharing the 2 cores: the simulator shares the cores among the ranks that
# compute at each moment, plan/core_sharing.h).
# usage: bench/predict_vs_measure.sh [BUILD=build] [STEPS=20]
#   PROFILE=each (default) profiles the machine right before every training run (`loom profile
#   --seconds 0.5 --micro-batch-sizes $SIZES`, ~9 s) and predicts that run from it: this VM
#   switches between a fast and a slow mode (the same single-rank run takes 80 or 115 ms per
#   step) every few seconds to minutes, so a profile taken minutes earlier measures another
#   machine. After the run a short probe (`loom profile --alone`, layer forward + backward)
#   checks that the machine is still in the profile's mode; if the layer's time moved by more
#   than STABLE (default 0.10), the run is repeated (up to TRIES=4 times; the last attempt is
#   kept and marked '!'). Every attempt is listed in $out/attempts.txt.
#   PROFILE=once profiles once (full profile) for the whole sweep; PROFILE=0 reuses an
#   existing cluster file (no stability check for either).
#   CONFIGS="2 1 bfs allreduce;1 2 1f1b zero3" narrows the sweep; ROUNDS=n runs every
#   configuration n times (the rounds go over all configurations in turn) and reports medians.
set -euo pipefail
build=${1:-build}
steps=${2:-20}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
config=configs/gpt-fortunes.toml
cluster=${CLUSTER:-clusters/this-machine.toml}
out=runs/predict_vs_measure
default_configs="2 1 gpipe allreduce;2 1 1f1b allreduce;2 1 interleaved allreduce;2 1 bfs allreduce;2 1 zb-h1 allreduce;1 2 1f1b allreduce;1 2 1f1b zero3"
for s in gpipe 1f1b interleaved bfs zb-h1; do
  for mode in allreduce zero3; do default_configs+=";2 2 $s $mode"; done
done
configs=${CONFIGS:-$default_configs}
rounds=${ROUNDS:-1}
profile=${PROFILE:-each}
sizes=${SIZES:-8,16}
stable=${STABLE:-0.10}
tries=${TRIES:-4}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"

if [[ $profile == once || ( $profile == 0 && ! -f $cluster ) ]]; then
  echo "== loom profile --out $cluster   (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$loom" profile --out "$cluster" --config "$config" 2>/dev/null
fi

printf '%-5s %-12s %-9s | %7s %7s %6s | %7s %7s | %8s %8s %5s | %8s %8s\n' pp×dp schedule dp-mode \
  pred_ms meas_ms err cmp_ms cmp_ms pred_st rt_st err pred_pk rt_pk
IFS=';' read -ra entries <<<"$configs"
loops_of() { [[ $1 == interleaved || $1 == bfs ]] && echo 2 || echo 1; }
predict() {  # pp dp schedule dp-mode cluster-file -> JSON
  "$loom" simulate --from-config "$config" --pp "$1" --dp "$2" --loops "$(loops_of "$3")" \
    --schedule "$3" --dp-mode "$4" --cluster "$5" --json
}
# Layer forward + backward (ms) at the largest profiled micro-batch of a cluster file.
layer_ms() {
  python3 -c 'import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb"))
b = max((x for x in c["block"] if x["kind"] == "layer"), key=lambda x: x["micro_batch"])
print(b["forward_ms"] + b["backward_ms"])' "$1"
}
: > "$out/attempts.txt"
for ((k = 0; k < rounds; ++k)); do
  for entry in "${entries[@]}"; do
    read -r pp dp s mode <<<"$entry"
    tag=pp$pp-dp$dp-$s-$mode
    for ((t = 1; t <= tries; ++t)); do
      rm -rf "$out/$tag-$k"
      mkdir -p "$out/$tag-$k"
      used=$cluster
      if [[ $profile == each ]]; then
        used=$out/$tag-$k/cluster.toml
        "$loom" profile --out "$used" --config "$config" --seconds 0.5 \
          --micro-batch-sizes "$sizes" > /dev/null 2>&1
      fi
      predict "$pp" "$dp" "$s" "$mode" "$used" > "$out/$tag-$k/predicted.json"
      cut -d' ' -f1 /proc/loadavg > "$out/$tag-$k/load"
      if ! "$loom" train --config "$config" --nproc $((pp * dp)) --pp "$pp" --dp "$dp" \
             --loops "$(loops_of "$s")" --schedule "$s" --dp-mode "$mode" --steps "$steps" \
             --eval_every 0 --output.dir "$out/$tag-$k" --output.progress false \
             > "$out/$tag-$k.log" 2>&1; then
        echo "$entry: loom train failed, see $out/$tag-$k.log"
        exit 1
      fi
      [[ $profile == each ]] || break
      "$loom" profile --out "$out/$tag-$k/probe.toml" --config "$config" --seconds 0.3 \
        --micro-batch-sizes "${sizes##*,}" --no-comm --alone > /dev/null 2>&1
      before=$(layer_ms "$used")
      after=$(layer_ms "$out/$tag-$k/probe.toml")
      ok=$(python3 -c "print(int(abs($after / $before - 1) <= $stable))")
      echo "$tag round $k attempt $t: layer $before -> $after ms, stable=$ok" >> "$out/attempts.txt"
      echo "$t" > "$out/$tag-$k/attempts"
      if [[ $ok == 1 ]]; then break; fi
      [[ $t == "$tries" ]] && echo "!" >> "$out/$tag-$k/attempts"
    done
  done
done
for entry in "${entries[@]}"; do
  read -r pp dp s mode <<<"$entry"
  tag=pp$pp-dp$dp-$s-$mode
  dirs=()
  for ((k = 0; k < rounds; ++k)); do dirs+=("$out/$tag-$k"); done
  python3 - "$pp×$dp" "$s" "$mode" "${dirs[@]}" <<'PY'
import json, statistics, sys
dirs = sys.argv[4:]
med = statistics.median
def tail(rows, k):
    v = [r[k] for r in rows if "step" in r and k in r]
    return v[3:] if len(v) > 5 else v
preds = [json.load(open(d + "/predicted.json")) for d in dirs]
runs = [[json.loads(l) for l in open(d + "/metrics.jsonl")] for d in dirs]
# Per round: the prediction from that round's profile and the run's median step (steps 4..N).
p_step = [p["step_s"] for p in preds]
m_step = [med(tail(rows, "step_s")) for rows in runs]
pred, meas = med(p_step), med(m_step)
pred_c = med(p["rank0_compute_s"] for p in preds)
meas_c = med(med(tail(rows, "compute_s")) for rows in runs)
def attempts(d):
    try:
        return "".join(open(d + "/attempts").read().split())
    except OSError:
        return "1"
errs = " ".join(f"{100 * (p - m) / m:+.0f}" + (f"({attempts(d)})" if attempts(d) != "1" else "")
                for p, m, d in zip(p_step, m_step, dirs))
summary = [r for r in runs[0] if r.get("summary") == "run"][-1]
p0 = preds[0]
p_state = p0["rank0_params_bytes"] + p0["rank0_grads_bytes"] + p0["rank0_optimizer_bytes"]
p_peak = p_state + p0["rank0_activation_bytes"]
r_state, r_peak = summary["state_bytes_r0"], summary["peak_bytes_r0"]
err = lambda p, m: f"{100 * (p - m) / m:+.0f}%"
load = open(dirs[0] + "/load").read().strip()
print(f"{sys.argv[1]:<5} {sys.argv[2]:<12} {sys.argv[3]:<9} | {pred*1e3:7.1f} {meas*1e3:7.1f} "
      f"{err(pred, meas):>6} | {pred_c*1e3:7.1f} {meas_c*1e3:7.1f} | "
      f"{p_state/1e6:8.2f} {r_state/1e6:8.2f} {err(p_state, r_state):>5} | "
      f"{p_peak/1e6:8.2f} {r_peak/1e6:8.2f}  (rounds {errs}; load {load})")
PY
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
echo "step: median over rounds of the prediction and of the run's median step_s (steps 4..N);"
echo "rounds: each round's error in % (prediction from the profile taken before that run); (n) = the"
echo "  run was repeated n times before the machine held still, (n!) = it never did (kept the last)"
echo "cmp: rank 0's time in F/B/I/W per step (predicted, measured);"
echo "pred_st / rt_st (MB): rank 0 parameters + gradients + optimizer state (+ transient buffers);"
echo "pred_pk / rt_pk: that plus activations (the runtime counts 8 x a stage's output per"
echo "micro-batch, the prediction the bytes the forward keeps: see docs/planner.md)."
