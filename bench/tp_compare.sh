#!/usr/bin/env bash
# The third dimension on this machine: the same GPT (configs/gpt-fortunes.toml) on 2 ranks as
# tp=2, dp=2 and pp=2, measured (median step_s of steps 6..N, rounds in ABBA order against the
# VM's drift) beside `loom simulate`'s prediction of each from a profile of this machine taken
# right before (docs/tensor-parallel.md).
# usage: bench/tp_compare.sh [BUILD=build] [STEPS=30]   ROUNDS=n (default 2: ABBA)
set -euo pipefail
build=${1:-build}
steps=${2:-30}
rounds=${ROUNDS:-2}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
config=configs/gpt-fortunes.toml
out=runs/tp_compare
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
mkdir -p "$out"
"$loom" profile --out "$out/cluster.toml" --config "$config" >/dev/null 2>&1

declare -A flags=([tp2]="--tp 2 --dp 1 --pp 1" [dp2]="--tp 1 --dp 2 --pp 1" [pp2]="--tp 1 --dp 1 --pp 2")
order=(tp2 dp2 pp2)
median_step() {
  python3 - "$1" <<'PY'
import json, statistics, sys
s = [json.loads(l)["step_s"] for l in open(sys.argv[1]) if '"loss"' in l]
print(f"{statistics.median(s[5:]) * 1000:.1f}")
PY
}
declare -A measured
for ((r = 0; r < rounds; r++)); do
  seq=("${order[@]}")
  ((r % 2)) && seq=(pp2 dp2 tp2)
  for k in "${seq[@]}"; do
    # shellcheck disable=SC2086
    "$loom" train --config "$config" --nproc 2 ${flags[$k]} --steps "$steps" --eval-every 0 \
      --progress false --output.dir "$out/$k-$r" --overwrite >"$out/$k-$r.log" 2>&1
    measured[$k]+="$(median_step "$out/$k-$r/metrics.jsonl") "
  done
done
printf '%-5s %12s %12s %8s\n' layout measured_ms predicted_ms error
for k in "${order[@]}"; do
  # shellcheck disable=SC2086
  pred=$("$loom" simulate --from-config "$config" --cluster "$out/cluster.toml" ${flags[$k]} --json |
    python3 -c 'import json,sys; print("%.1f" % (json.loads(sys.stdin.readline())["step_s"] * 1000))')
  meas=$(python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.1f}')" ${measured[$k]})
  printf '%-5s %12s %12s %7.0f%%\n' "$k" "$meas" "$pred" "$(python3 -c "print(($pred - $meas) / $meas * 100)")"
done
