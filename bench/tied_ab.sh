#!/usr/bin/env bash
# A head tied to the embedding on a pipeline (docs/models.md, "A tied head on a pipeline")
# against the same model untied: a GPT on synthetic tokens of a vocabulary V, pp = 2 on 2 ranks,
# in rounds whose order alternates (ABBA), so that this machine's drift falls on both alike.
# Tied, the last stage receives the embedding (V·h fp32) each step and sends its gradient back,
# and the first stage's reduction waits for it; untied, the last stage steps a head of its own.
# Prints each run's tokens/s, each variant's median and the median per-round ratio tied/untied.
# usage: bench/tied_ab.sh [BUILD_DIR] [ROUNDS] [STEPS]
#   VOCAB (8192), WIDTH (256), LAYERS (4), SCHEDULE (1f1b), DP (1) change the shape.
set -euo pipefail
build=${1:-build}
rounds=${2:-4}
steps=${3:-30}
vocab=${VOCAB:-8192}
width=${WIDTH:-256}
layers=${LAYERS:-4}
schedule=${SCHEDULE:-1f1b}
dp=${DP:-1}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cd "$(dirname "$0")/.."
echo "tied_ab: gpt V=$vocab h=$width layers=$layers, pp=2 x dp=$dp, $schedule, $steps steps" \
  "per run, $rounds rounds"
for ((r = 0; r < rounds; ++r)); do
  order=(untied tied)
  ((r % 2)) && order=(tied untied)
  for v in "${order[@]}"; do
    rm -rf "$out/run"
    tie=()
    [[ $v == tied ]] && tie=(--tie-embeddings)
    "$build/bin/loom" train --model.kind gpt --vocab "$vocab" --width "$width" --heads 4 \
      --layers "$layers" --seq-len 64 "${tie[@]}" --data.kind synthetic \
      --data.synthetic_size 4096 --nproc $((2 * dp)) --pp 2 --dp "$dp" --schedule "$schedule" \
      --microbatches 4 --global-batch $((16 * dp)) --steps "$steps" --eval-every 0 \
      --final-eval false --output.dir "$out/run" --overwrite --progress false >"$out/log" 2>&1 ||
      { echo "tied_ab: $v failed:" >&2; tail -5 "$out/log" >&2; exit 1; }
    python3 - "$out/run/metrics.jsonl" "$r" "$v" <<'PY' | tee -a "$out/rows"
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "tokens_per_s" in r][5:]
step = sum(r["step_s"] for r in rows) / len(rows)
tokens = rows[0]["tokens_per_s"] * rows[0]["step_s"]
print(f"{sys.argv[2]} {sys.argv[3]} {tokens / step:.0f}")
PY
  done
done
python3 - "$out/rows" <<'PY'
import sys, statistics as st
by = {}
for r, v, t in (l.split() for l in open(sys.argv[1])):
    by.setdefault(v, {})[r] = float(t)
for v in ("untied", "tied"):
    print(f"{v:7s} median {st.median(by[v].values()):.0f} tokens/s")
ratio = st.median(by["tied"][r] / by["untied"][r] for r in by["tied"])
print(f"tied / untied, median of the rounds' ratios: {ratio:.3f}")
PY
