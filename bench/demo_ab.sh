#!/usr/bin/env bash
# The demo's training (GPT on fortunes, 4 ranks, pp=2 x dp=2, bfs with 2 loops, 4 micro-batches)
# run by several loom binaries or flag sets in turn, rotating the order every round, so that
# the machine's drift (tens of percent within minutes here) falls on all of them alike.
# usage: bench/demo_ab.sh ROUNDS STEPS NAME=LOOM_BINARY[,EXTRA FLAGS] ...
#   e.g. bench/demo_ab.sh 2 300 old=/tmp/old/bin/loom new=build/bin/loom "gloo=build/bin/loom,--comm gloo"
# Prints per run and per variant the median tokens/s (mean step time after 10 warm-up steps)
# and the one-thread 512x512 matmul rate of `loom doctor` before each round.
set -euo pipefail
rounds=$1 steps=$2
shift 2
variants=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
here=$(cd "$(dirname "$0")/.." && pwd)
echo "round variant tokens/s"
for ((r = 0; r < rounds; ++r)); do
  for ((k = 0; k < ${#variants[@]}; ++k)); do
    v=${variants[(k + r) % ${#variants[@]}]}
    name=${v%%=*} spec=${v#*=}
    bin=${spec%%,*} flags=""
    [[ $spec == *,* ]] && flags=${spec#*,}
    [[ $k -eq 0 ]] && echo "# matmul $("$bin" doctor | awk '/matmul/ {print $3}') GFLOP/s ($name's doctor)"
    rm -rf "$out/run"
    # shellcheck disable=SC2086
    "$bin" train --config "$here/configs/gpt-fortunes.toml" --nproc 4 --pp 2 --loops 2 \
      --schedule bfs --microbatches 4 --steps "$steps" --eval_every 0 --eval_batches 1 \
      --output.dir "$out/run" --overwrite --progress false $flags >/dev/null 2>&1
    tps=$(python3 - "$out/run/metrics.jsonl" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in r][10:]
step = sum(r["step_s"] for r in rows) / len(rows)
print(f"{rows[0]['tokens_per_s'] * rows[0]['step_s'] / step:.0f}")
PY
)
    echo "$r $name $tps" | tee -a "$out/rows"
  done
done
python3 - "$out/rows" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
names = list(dict.fromkeys(n for _, n, _ in rows))
for n in names:
    v = [float(t) for _, m, t in rows if m == n]
    print(f"{n:>10}: median {st.median(v):.0f} tokens/s over {len(v)} runs ({' '.join(f'{x:.0f}' for x in v)})")
PY
