#!/usr/bin/env bash
# make demo: train the GPT on the fortunes corpus on local ranks and show where results went.
set -euo pipefail
build=${1:-build}
nproc=${2:-4}
out=runs/demo
rm -rf "$out"
mkdir -p "$out"
"$build/bin/loom" schedule --schedule bfs --pp 2 --loops 2 --microbatches 4 --format svg \
  --out "$out/schedule.svg"
# 800 steps: about two minutes on 2 cores (the config's 300 take ~50 s).
"$build/bin/loom" train --config configs/gpt-fortunes.toml --nproc "$nproc" \
  --pp 2 --loops 2 --schedule bfs --microbatches 4 --steps 800 --eval_every 100 \
  --output.dir "$out" --output.trace "$out/timeline.json" --overwrite
echo
echo "a sample from the trained model (loom generate):"
"$build/bin/loom" generate --checkpoint "$out/checkpoint" --prompt "The " --max-tokens 160 \
  --temperature 0.8 --top-k 40 --seed 1
echo
echo "demo outputs in $out/:"
ls -1 "$out" | sed 's/^/  /'
