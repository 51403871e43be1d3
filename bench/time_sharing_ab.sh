#!/usr/bin/env bash
# More ranks than cores: the MPI engine's long scheduler slice (comm/mpi_engine.h) on and off
# (LOOM_ENGINE_SLICE_US=0: the kernel's default), in rounds whose order alternates (ABBA), on
# the fortunes GPT (configs/gpt-fortunes.toml), 4 ranks. Prints each run's median step (steps
# 6..N), and per configuration the median ratio off / on (> 1: the long slice is faster).
# usage: bench/time_sharing_ab.sh [BUILD_DIR] [ROUNDS] [STEPS]
#   CONFIGS="2 2 1f1b;1 4 1f1b;4 1 1f1b" (pp dp schedule) chooses the runs.
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
steps=${3:-60}
configs=${CONFIGS:-"2 2 1f1b;1 4 1f1b;4 1 1f1b"}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$(dirname "$0")/.."
echo "cores: $(getconf _NPROCESSORS_ONLN), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # label round pp dp schedule slice_us
  rm -rf "$out/run"
  LOOM_ENGINE_SLICE_US=$6 "$build/bin/loom" train --config configs/gpt-fortunes.toml \
    --nproc $(($3 * $4)) --pp "$3" --dp "$4" --schedule "$5" --steps "$steps" --eval_every 0 --final-eval false \
    --output.dir "$out/run" --overwrite --output.progress false >/dev/null 2>&1
  python3 - "$out/run/metrics.jsonl" "$1" "$2" "$3x$4-$5" <<'PY' | tee -a "$out/rows"
import json, statistics, sys
steps = [r["step_s"] for r in map(json.loads, open(sys.argv[1])) if "step_s" in r][5:]
print(sys.argv[4], sys.argv[2], sys.argv[3], f"{1000 * statistics.median(steps):.1f}")
PY
}
IFS=';' read -ra entries <<<"$configs"
for ((r = 0; r < rounds; ++r)); do
  for entry in "${entries[@]}"; do
    read -r pp dp s <<<"$entry"
    if ((r % 2 == 0)); then
      run on "$r" "$pp" "$dp" "$s" 10000
      run off "$r" "$pp" "$dp" "$s" 0
      run off "$r" "$pp" "$dp" "$s" 0
      run on "$r" "$pp" "$dp" "$s" 10000
    else
      run off "$r" "$pp" "$dp" "$s" 0
      run on "$r" "$pp" "$dp" "$s" 10000
      run on "$r" "$pp" "$dp" "$s" 10000
      run off "$r" "$pp" "$dp" "$s" 0
    fi
  done
done
python3 - "$out/rows" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for cfg, label, r, ms in rows:
    by.setdefault(cfg, {}).setdefault(r, {}).setdefault(label, []).append(float(ms))
for cfg, rounds in by.items():
    ratios = [st.mean(v["off"]) / st.mean(v["on"]) for v in rounds.values()]
    on = st.median(x for v in rounds.values() for x in v["on"])
    off = st.median(x for v in rounds.values() for x in v["off"])
    print(f"{cfg:>10}: long slice {on:.1f} ms, default {off:.1f} ms per step; off/on per round "
          + " ".join(f"{x:.3f}" for x in ratios) + f", median {st.median(ratios):.3f}")
PY
