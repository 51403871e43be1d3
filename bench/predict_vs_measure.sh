#!/usr/bin/env bash
# Predicted vs measured step time and memory on this machine (docs/planner.md).
#   predicted: loom simulate --from-config configs/gpt-fortunes.toml over the cluster file that
#              `loom profile` writes (measured block times, links, optimizer);
#   measured:  loom train of the same configuration, median step_s of steps 4..N from its
#              metrics.jsonl, and the runtime's own memory accounting (summary line).
# Every schedule at pp=2 (loops 2 for interleaved and bfs), dp=2, allreduce and zero3.
# usage: bench/predict_vs_measure.sh [BUILD=build] [STEPS=20]
#   PROFILE=0 reuses an existing cluster file; SCHEDULES / MODES narrow the sweep.
set -euo pipefail
build=${1:-build}
steps=${2:-20}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
config=configs/gpt-fortunes.toml
cluster=${CLUSTER:-clusters/this-machine.toml}
out=runs/predict_vs_measure
schedules=${SCHEDULES:-"gpipe 1f1b interleaved bfs zb-h1"}
modes=${MODES:-"allreduce zero3"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"

if [[ ${PROFILE:-1} != 0 || ! -f $cluster ]]; then
  echo "== loom profile --out $cluster   (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$loom" profile --out "$cluster" --config "$config" 2>/dev/null
fi

printf '%-12s %-9s | %7s %7s %6s | %7s %7s | %8s %8s %5s | %8s %8s\n' schedule dp-mode \
  pred_ms meas_ms err cmp_ms cmp_ms pred_st rt_st err pred_pk rt_pk
for s in $schedules; do
  loops=1
  [[ $s == interleaved || $s == bfs ]] && loops=2
  for mode in $modes; do
    tag=$s-$mode
    pred=$("$loom" simulate --from-config "$config" --pp 2 --dp 2 --loops $loops --schedule "$s" \
             --dp-mode "$mode" --cluster "$cluster" --json)
    rm -rf "$out/$tag"
    load0=$(cut -d' ' -f1 /proc/loadavg)
    if ! "$loom" train --config "$config" --nproc 4 --pp 2 --loops $loops --schedule "$s" \
           --dp-mode "$mode" --steps "$steps" --eval_every 0 --output.dir "$out/$tag" \
           --output.progress false > "$out/$tag.log" 2>&1; then
      echo "$s $mode: loom train failed, see $out/$tag.log"
      continue
    fi
    python3 - "$out/$tag/metrics.jsonl" "$pred" "$s" "$mode" "$load0" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step_s"] for r in rows if "step" in r and "step_s" in r]
summary = [r for r in rows if r.get("summary") == "run"][-1]
pred = json.loads(sys.argv[2])
tail = lambda k: [r[k] for r in rows if "step" in r and k in r][3:]
meas = statistics.median(steps[3:] if len(steps) > 5 else steps)
meas_compute = statistics.median(tail("compute_s"))
p_state = pred["rank0_params_bytes"] + pred["rank0_grads_bytes"] + pred["rank0_optimizer_bytes"]
p_peak = p_state + pred["rank0_activation_bytes"]
r_state, r_peak = summary["state_bytes_r0"], summary["peak_bytes_r0"]
err = lambda p, m: f"{100 * (p - m) / m:+.0f}%"
print(f"{sys.argv[3]:<12} {sys.argv[4]:<9} | {pred['step_s']*1e3:7.1f} {meas*1e3:7.1f} "
      f"{err(pred['step_s'], meas):>6} | {pred['rank0_compute_s']*1e3:7.1f} {meas_compute*1e3:7.1f} | "
      f"{p_state/1e6:8.2f} {r_state/1e6:8.2f} {err(p_state, r_state):>5} | "
      f"{p_peak/1e6:8.2f} {r_peak/1e6:8.2f}  (load {sys.argv[5]})")
PY
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc)"
echo "step: median step_s (steps 4..N); cmp: rank 0's time in F/B/I/W per step (predicted, measured);"
echo "pred_st / rt_st (MB): rank 0 parameters + gradients + optimizer state (+ transient buffers);"
echo "pred_pk / rt_pk: that plus activations (the runtime counts 8 x a stage's output per"
echo "micro-batch, the prediction the bytes the forward keeps: see docs/planner.md)."
