#!/usr/bin/env bash
# Pipeline schedules against each other on the fortunes GPT (configs/gpt-fortunes.toml, 6
# layers), pp = 2 on 2 ranks, in rounds whose order rotates, so that this machine's drift
# (tens of percent within minutes) falls on every schedule alike. Prints each run's tokens/s,
# each schedule's median and its median per-round ratio to the first schedule, and the peak
# activation bytes per rank. zbv and dualpipev run with loops 2 (their V of 4 stages), the
# others with 1.
# usage: bench/schedule_ab.sh [BUILD_DIR] [ROUNDS] [STEPS] [SCHEDULE...]   (default: 1f1b zb-h1)
#   PP (2), LAYERS (6), MICROBATCHES (8) and GLOBAL_BATCH (32) change the shape: deeper
#   pipelines need as many cores as ranks (e.g. PP=8 LAYERS=16 MICROBATCHES=8 on 8+ cores).
#   Ranks talk through Open MPI where loom was built with it, else through Gloo. DATA replaces
#   the config's corpus (a machine without the fortunes package: gpu-bundle/fortunes).
set -euo pipefail
build=${1:-build}
rounds=${2:-4}
steps=${3:-60}
shift $(($# < 3 ? $# : 3))
pp=${PP:-2}
layers=${LAYERS:-6}
microbatches=${MICROBATCHES:-8}
global_batch=${GLOBAL_BATCH:-32}
data=()
[[ -n ${DATA:-} ]] && data=(--data.path "$(realpath "$DATA")")
schedules=("$@")
[[ ${#schedules[@]} -gt 0 ]] || schedules=(1f1b zb-h1)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$(dirname "$0")/.."
for ((r = 0; r < rounds; ++r)); do
  for ((k = 0; k < ${#schedules[@]}; ++k)); do
    s=${schedules[(k + r) % ${#schedules[@]}]}
    rm -rf "$out/run"
    loops=1
    [[ $s == zbv || $s == dualpipev ]] && loops=2
    "$build/bin/loom" train --config configs/gpt-fortunes.toml "${data[@]}" --layers "$layers" \
      --nproc "$pp" --pp "$pp" --schedule "$s" --loops "$loops" --microbatches "$microbatches" \
      --global_batch "$global_batch" --steps "$steps" --eval_every 0 --final-eval false \
      --output.dir "$out/run" --overwrite --progress false >"$out/log" 2>&1 ||
      { echo "schedule_ab: $s failed:" >&2; tail -5 "$out/log" >&2; exit 1; }
    python3 - "$out/run/metrics.jsonl" "$r" "$s" <<'PY' | tee -a "$out/rows"
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in r][5:]
step = sum(r["step_s"] for r in rows) / len(rows)
tokens = rows[0]["tokens_per_s"] * rows[0]["step_s"]
peak = max(r["peak_activation_bytes"] for r in rows)
print(f"{sys.argv[2]} {sys.argv[3]} {tokens / step:.0f} {peak}")
PY
  done
done
python3 - "$out/rows" "${schedules[0]}" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
base = sys.argv[2]
by = {}
for r, s, t, p in rows:
    by.setdefault(s, {})[r] = (float(t), int(p))
for s, runs in by.items():
    tps = [t for t, _ in runs.values()]
    ratio = st.median(runs[r][0] / by[base][r][0] for r in runs if r in by[base])
    peak = max(p for _, p in runs.values())
    print(f"{s:>12}: median {st.median(tps):.0f} tokens/s, {ratio:.3f}x {base} (median of per-round "
          f"ratios), peak activations {peak / 2**20:.1f} MiB (rank 0)")
PY
