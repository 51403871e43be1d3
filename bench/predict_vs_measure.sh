#!/usr/bin/env bash
# Predicted vs measured step time and memory on this machine (docs/notes/planner-validation.md).
#   predicted: loom simulate --from-config configs/gpt-fortunes.toml over the cluster file that
#              `loom profile` writes (measured block times, links, optimizer);
#   measured:  loom train of the same configuration, median step_s of steps 4..N from its
#              metrics.jsonl, and the runtime's own memory accounting (summary line).
# Configurations ("pp dp schedule dp-mode [tp]"): every schedule at pp=2 (loops 2 for interleaved
# and bfs), dp=2 with allreduce and zero3 (2 ranks each: one per core here), then pp=2 x dp=2
# (4 ranks time-sharing the 2 cores: the simulator shares the cores among the ranks that
# compute at each moment, plan/core_sharing.h).
# usage: bench/predict_vs_measure.sh [BUILD=build] [STEPS=20]
#   This VM changes speed by up to 2x for seconds at a time (other tenants; docs/notes/planner-validation.md),
#   so each run is predicted twice:
#   - from a profile taken right before it (PROFILE=each, default: `loom profile --seconds 0.5
#     --micro-batch-sizes $SIZES`, ~10 s; PROFILE=once profiles once for the sweep, PROFILE=0
#     reuses the cluster file);
#   - from the same profile with the machine as it was during the run: `loom train
#     --output.calibrate_every $CAL` (default 2) has each rank time one layer alone between
#     steps, then all ranks at once (outside the step time); each such sample gives a speed
#     per pipeline rank (that time over the profile's time of the layer), simulated with
#     `loom simulate --rank-speed`; the prediction is the median over the samples, with
#     loaded_slowdown = at once / alone (when there are no more ranks than cores); see
#     insitu_cluster.
#     Everything else (links, memory, the schedule, the simulator) unchanged.
#   OVERSUB=x predicts with `loom simulate --oversubscribed x` (the slowdown beyond a fair share
#   of the cores when ranks outnumber them, which `loom profile` measures on 2C ranks; OVERSUB=1
#   MODE=repredict shows what that factor does to the same runs).
#   CONFIG=configs/llama-fortunes.toml predicts and trains another model (its runs in
#   runs/predict_vs_measure-llama-fortunes); CONFIGS="2 1 bfs allreduce;1 2 1f1b zero3" narrows the sweep; ROUNDS=n runs every
#   configuration n times (the rounds go over all configurations in turn) and reports medians.
#   MODE=repredict predicts the runs already in runs/predict_vs_measure again from their saved
#   profiles and calibrations (after a change to the simulator; nothing is trained or
#   profiled); MODE=report only prints their table.
set -euo pipefail
build=${1:-build}
steps=${2:-20}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
config=${CONFIG:-configs/gpt-fortunes.toml}
cluster=${CLUSTER:-clusters/this-machine.toml}
out=runs/predict_vs_measure
[[ -n ${CONFIG:-} ]] && out+="-$(basename "$config" .toml)"  # another model's runs apart
default_configs="2 1 gpipe allreduce;2 1 1f1b allreduce;2 1 interleaved allreduce;2 1 bfs allreduce;2 1 zb-h1 allreduce;1 2 1f1b allreduce;1 2 1f1b zero3"
for s in gpipe 1f1b interleaved bfs zb-h1; do
  for mode in allreduce zero3; do default_configs+=";2 2 $s $mode"; done
done
configs=${CONFIGS:-$default_configs}
rounds=${ROUNDS:-1}
profile=${PROFILE:-each}
sizes=${SIZES:-8,16}
cal=${CAL:-2}
mode_=${MODE:-run}
case $mode_ in run | repredict | report) ;; *) echo "MODE must be run, repredict or report" >&2; exit 2 ;; esac
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"

if [[ $mode_ == run ]] && [[ $profile == once || ( $profile == 0 && ! -f $cluster ) ]]; then
  echo "== loom profile --out $cluster   (load average: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$loom" profile --out "$cluster" --config "$config" 2>/dev/null
fi

printf '%-5s %-12s %-9s | %7s %7s %6s | %5s %7s %6s %7s | %7s %7s | %8s %8s %5s | %8s %8s\n' pp×dp schedule dp-mode \
  pred_ms meas_ms err speed ins_ms err ins_cmp pred_cmp cmp_ms pred_st rt_st err pred_pk rt_pk
IFS=';' read -ra entries <<<"$configs"
loops_of() { [[ $1 == interleaved || $1 == bfs ]] && echo 2 || echo 1; }
predict() {  # pp dp schedule dp-mode cluster-file [flags] -> JSON
  "$loom" simulate --from-config "$config" --pp "$1" --dp "$2" --loops "$(loops_of "$3")" \
    --schedule "$3" --dp-mode "$4" --cluster "$5" --json ${OVERSUB:+--oversubscribed "$OVERSUB"} "${@:6}"
}
# The machine as the run measured it between its steps: bench/insitu_cluster.py.
insitu_cluster() {  # cluster-file metrics.jsonl out-file pp dp tp
  python3 bench/insitu_cluster.py "$@"
}
for ((k = 0; k < rounds; ++k)); do
  [[ $mode_ == report ]] && break
  for entry in "${entries[@]}"; do
    read -r pp dp s mode tp <<<"$entry"
    tp=${tp:-1}
    tag=pp$pp-dp$dp-$s-$mode$( ((tp > 1)) && echo "-tp$tp" || true)
    used=$cluster
    if [[ $mode_ == repredict ]]; then
      [[ -f $out/$tag-$k/cluster.toml ]] && used=$out/$tag-$k/cluster.toml
      [[ -f $out/$tag-$k/profile-used ]] && used=$(cat "$out/$tag-$k/profile-used")
    else
      rm -rf "$out/$tag-$k"
      mkdir -p "$out/$tag-$k"
      if [[ $profile == each ]]; then
        used=$out/$tag-$k/cluster.toml
        "$loom" profile --out "$used" --config "$config" --seconds 0.5 \
          --micro-batch-sizes "$sizes" > /dev/null 2>&1
      else
        echo "$used" > "$out/$tag-$k/profile-used"
      fi
    fi
    predict "$pp" "$dp" "$s" "$mode" "$used" --tp "$tp" > "$out/$tag-$k/predicted.json"
    [[ $mode_ == repredict ]] || cut -d' ' -f1 /proc/loadavg > "$out/$tag-$k/load"
    if [[ $mode_ == run ]] && ! "$loom" train --config "$config" --nproc $((pp * dp * tp)) --pp "$pp" --dp "$dp" --tp "$tp" \
           --loops "$(loops_of "$s")" --schedule "$s" --dp-mode "$mode" --steps "$steps" \
           --eval_every 0 --final-eval false --output.dir "$out/$tag-$k" --overwrite \
           --output.progress false \
           --output.calibrate_every "$cal" > "$out/$tag-$k.log" 2>&1; then
      echo "$entry: loom train failed, see $out/$tag-$k.log"
      exit 1
    fi
    if [[ $cal -gt 0 ]] && grep -q calib_micro_batch "$out/$tag-$k/metrics.jsonl"; then
      insitu_cluster "$used" "$out/$tag-$k/metrics.jsonl" "$out/$tag-$k/cluster-insitu.toml" \
        "$pp" "$dp" "$tp" > "$out/$tag-$k/speed"
      : > "$out/$tag-$k/predicted-insitu.jsonl"
      while read -r speeds; do
        predict "$pp" "$dp" "$s" "$mode" "$out/$tag-$k/cluster-insitu.toml" --tp "$tp" --rank-speed "$speeds" \
          >> "$out/$tag-$k/predicted-insitu.jsonl"
      done < "$out/$tag-$k/cluster-insitu.toml.speeds"
    fi
  done
done
for entry in "${entries[@]}"; do
  read -r pp dp s mode tp <<<"$entry"
  tp=${tp:-1}
  tag=pp$pp-dp$dp-$s-$mode$( ((tp > 1)) && echo "-tp$tp" || true)
  dirs=()
  for ((k = 0; k < rounds; ++k)); do dirs+=("$out/$tag-$k"); done
  python3 - "$pp×$dp×$tp" "$s" "$mode" "${dirs[@]}" <<'PY'
import json, statistics, sys
dirs = sys.argv[4:]
med = statistics.median
def tail(rows, k):
    v = [r[k] for r in rows if "step" in r and k in r]
    return v[3:] if len(v) > 5 else v
preds = [json.load(open(d + "/predicted.json")) for d in dirs]
def insitu_rows(d):  # one simulation per calibration sample
    return [json.loads(l) for l in open(d + "/predicted-insitu.jsonl")]
def insitu(d):
    try:
        speed, loaded = map(float, open(d + "/speed").read().split())
        return med(p["step_s"] for p in insitu_rows(d)), speed, loaded
    except OSError:
        return None, None, None
ins = [insitu(d) for d in dirs]
runs = [[json.loads(l) for l in open(d + "/metrics.jsonl")] for d in dirs]
# Per round: the predictions for that run and its median step (steps 4..N).
p_step = [p["step_s"] for p in preds]
m_step = [med(tail(rows, "step_s")) for rows in runs]
pred, meas = med(p_step), med(m_step)
pred_c = med(p["rank0_compute_s"] for p in preds)
meas_c = med(med(tail(rows, "compute_s")) for rows in runs)
pct = lambda p, m: f"{100 * (p - m) / m:+.0f}"
errs = " ".join(pct(p, m) for p, m in zip(p_step, m_step))
# A round's prediction is compared with its own run; the column is the median of those errors.
paired = lambda preds: f"{100 * med((p - m) / m for p, m in zip(preds, m_step)):+.0f}%"
if all(i[0] is not None for i in ins):
    i_step = [i[0] for i in ins]
    ipred, speed = med(i_step), med(i[1] for i in ins)
    ins_c = med(med(p["rank0_compute_s"] for p in insitu_rows(d)) for d in dirs)
    ins_cols = f"{speed:5.2f} {ipred*1e3:7.1f} {paired(i_step):>6} {ins_c*1e3:7.1f}"
    ierrs = " ".join(pct(p, m) for p, m in zip(i_step, m_step))
    speeds = " ".join(f"{i[1]:.2f}/{i[2]:.2f}" for i in ins)
    rounds = f"rounds {errs} / in-situ {ierrs}; speed/loaded {speeds}"
else:
    ins_cols = f"{'-':>5} {'-':>7} {'-':>6} {'-':>7}"
    rounds = f"rounds {errs}"
summary = [r for r in runs[0] if r.get("summary") == "run"][-1]
p0 = preds[0]
p_state = p0["rank0_params_bytes"] + p0["rank0_grads_bytes"] + p0["rank0_optimizer_bytes"]
p_peak = p_state + p0["rank0_activation_bytes"]
r_state, r_peak = summary["state_bytes_r0"], summary["peak_bytes_r0"]
err = lambda p, m: pct(p, m) + "%"
load = open(dirs[0] + "/load").read().strip()
print(f"{sys.argv[1]:<5} {sys.argv[2]:<12} {sys.argv[3]:<9} | {pred*1e3:7.1f} {meas*1e3:7.1f} "
      f"{paired(p_step):>6} | {ins_cols} | {pred_c*1e3:7.1f} {meas_c*1e3:7.1f} | "
      f"{p_state/1e6:8.2f} {r_state/1e6:8.2f} {err(p_state, r_state):>5} | "
      f"{p_peak/1e6:8.2f} {r_peak/1e6:8.2f}  ({rounds}; load {load})")
PY
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)"
echo "pred / meas: median over rounds of the prediction from the profile taken before the run and"
echo "  of the run's median step_s (steps 4..N); rounds: each round's error in %; err: their median;"
echo "speed: the machine's compute time during the run over the profile's (loom train"
echo "  --output.calibrate_every; mean over pipeline ranks); ins: the median over the run's"
echo "  calibration samples of the prediction with each pipeline rank's compute times x its speed"
echo "  in that sample, and the slowdown under load measured during the run (loaded, in the rounds list);"
echo "ins_cmp / pred_cmp / cmp_ms: rank 0's time in F/B/I/W per step (predicted with the speed"
echo "  during the run, predicted from the profile, measured);"
echo "pred_st / rt_st (MB): rank 0 parameters + gradients + optimizer state (+ transient buffers);"
echo "pred_pk / rt_pk: that plus activations (the runtime counts 8 x a stage's output per"
echo "micro-batch, the prediction the bytes the forward keeps: see docs/notes/planner-validation.md)."
