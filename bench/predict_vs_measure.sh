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
#   PROFILE=0 reuses an existing cluster file; CONFIGS="2 1 bfs allreduce;1 2 1f1b zero3" narrows
#   the sweep; ROUNDS=n runs every configuration n times and keeps the median (default 1). The
#   rounds go over all configurations in turn, so that each median sees several phases of a
#   machine whose speed drifts (this VM: +-20% over tens of seconds).
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
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"

if [[ ${PROFILE:-1} != 0 || ! -f $cluster ]]; then
  echo "== loom profile --out $cluster   (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$loom" profile --out "$cluster" --config "$config" 2>/dev/null
fi

printf '%-5s %-12s %-9s | %7s %7s %6s | %7s %7s | %8s %8s %5s | %8s %8s\n' pp×dp schedule dp-mode \
  pred_ms meas_ms err cmp_ms cmp_ms pred_st rt_st err pred_pk rt_pk
IFS=';' read -ra entries <<<"$configs"
loops_of() { [[ $1 == interleaved || $1 == bfs ]] && echo 2 || echo 1; }
declare -A preds loads
for entry in "${entries[@]}"; do
  read -r pp dp s mode <<<"$entry"
  preds[$entry]=$("$loom" simulate --from-config "$config" --pp "$pp" --dp "$dp" \
                    --loops "$(loops_of "$s")" --schedule "$s" --dp-mode "$mode" \
                    --cluster "$cluster" --json)
done
for ((k = 0; k < rounds; ++k)); do
  for entry in "${entries[@]}"; do
    read -r pp dp s mode <<<"$entry"
    tag=pp$pp-dp$dp-$s-$mode
    loads[$entry]+="$(cut -d' ' -f1 /proc/loadavg) "
    rm -rf "$out/$tag-$k"
    if ! "$loom" train --config "$config" --nproc $((pp * dp)) --pp "$pp" --dp "$dp" \
           --loops "$(loops_of "$s")" --schedule "$s" --dp-mode "$mode" --steps "$steps" \
           --eval_every 0 --output.dir "$out/$tag-$k" --output.progress false \
           > "$out/$tag-$k.log" 2>&1; then
      echo "$entry: loom train failed, see $out/$tag-$k.log"
      exit 1
    fi
  done
done
for entry in "${entries[@]}"; do
  read -r pp dp s mode <<<"$entry"
  tag=pp$pp-dp$dp-$s-$mode
  pred=${preds[$entry]}
  load0=${loads[$entry]%% *}
  metrics=()
  for ((k = 0; k < rounds; ++k)); do metrics+=("$out/$tag-$k/metrics.jsonl"); done
  python3 - "$pred" "$pp×$dp" "$s" "$mode" "$load0" "${metrics[@]}" <<'PY'
import json, statistics, sys
pred = json.loads(sys.argv[1])
runs = [[json.loads(l) for l in open(f)] for f in sys.argv[6:]]
def tail(rows, k):
    v = [r[k] for r in rows if "step" in r and k in r]
    return v[3:] if len(v) > 5 else v
# Median over runs of each run's median step (steps 4..N).
meas = statistics.median(statistics.median(tail(rows, "step_s")) for rows in runs)
meas_compute = statistics.median(statistics.median(tail(rows, "compute_s")) for rows in runs)
summary = [r for r in runs[0] if r.get("summary") == "run"][-1]
p_state = pred["rank0_params_bytes"] + pred["rank0_grads_bytes"] + pred["rank0_optimizer_bytes"]
p_peak = p_state + pred["rank0_activation_bytes"]
r_state, r_peak = summary["state_bytes_r0"], summary["peak_bytes_r0"]
err = lambda p, m: f"{100 * (p - m) / m:+.0f}%"
print(f"{sys.argv[2]:<5} {sys.argv[3]:<12} {sys.argv[4]:<9} | {pred['step_s']*1e3:7.1f} {meas*1e3:7.1f} "
      f"{err(pred['step_s'], meas):>6} | {pred['rank0_compute_s']*1e3:7.1f} {meas_compute*1e3:7.1f} | "
      f"{p_state/1e6:8.2f} {r_state/1e6:8.2f} {err(p_state, r_state):>5} | "
      f"{p_peak/1e6:8.2f} {r_peak/1e6:8.2f}  (load {sys.argv[5]})")
PY
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
echo "step: median step_s (steps 4..N); cmp: rank 0's time in F/B/I/W per step (predicted, measured);"
echo "pred_st / rt_st (MB): rank 0 parameters + gradients + optimizer state (+ transient buffers);"
echo "pred_pk / rt_pk: that plus activations (the runtime counts 8 x a stage's output per"
echo "micro-batch, the prediction the bytes the forward keeps: see docs/planner.md)."
