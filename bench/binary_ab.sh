#!/usr/bin/env bash
# Two loom binaries against each other (before / after a change) on the peers' byte-level GPT
# (bench/peers_compare.sh's shape: D=256, L=4, H=4, T=128, vocabulary 256, AdamW, one thread
# per rank), in rounds whose order alternates (ABBA), so that this machine's drift falls on
# both alike. Prints each round's median step times and ratio A / B (> 1: B is faster), and
# the median ratio.
# usage: bench/binary_ab.sh LOOM_A LOOM_B [ROUNDS] [WORLD] [LOOM FLAGS...]
#   bench/binary_ab.sh /tmp/loom-before build/bin/loom 6 1 --global_batch 16 --microbatches 1
#   bench/binary_ab.sh /tmp/loom-before build/bin/loom 4 2 --pp 2 --schedule gpipe --global_batch 32 --microbatches 8
# WORLD 1 runs `loom train --nproc 1`; more ranks run under the venv's torchrun with gloo, as
# bench/peers_compare.sh does, or with COMM=mpi under `loom train --nproc WORLD` (Open MPI, the
# MPI engine: comm/mpi_engine.h):
#   COMM=mpi bench/binary_ab.sh /tmp/loom-before build/bin/loom 4 2 --pp 2 --schedule bfs --loops 2 --global_batch 32 --microbatches 2
set -euo pipefail
a=$(realpath "$1")
b=$(realpath "$2")
rounds=${3:-4}
world=${4:-1}
shift $(($# < 4 ? $# : 4))
venv=${LOOM_VENV:-$HOME/.local/share/loom/venv}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
model=(--model.kind gpt --width 256 --layers 4 --heads 4 --seq_len 128 --data.kind synthetic
  --data.synthetic_size 1024 --optimizer adamw --lr 3e-4 --lr_schedule constant --steps 13
  --eval_batches 1 --overwrite --progress false)

run() {  # binary -> median step ms after 3 warm-up steps
  rm -rf "$out/run"
  if [[ $world == 1 || ${COMM:-gloo} == mpi ]]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$1" train --nproc "$world" \
      "${model[@]}" "${@:2}" --output.dir "$out/run" >"$out/log" 2>&1
  else
    "$venv/bin/torchrun" --standalone --nproc-per-node "$world" --no-python "$1" train --comm gloo \
      "${model[@]}" "${@:2}" --output.dir "$out/run" >"$out/log" 2>&1
  fi || { tail -3 "$out/log" >&2; exit 1; }
  python3 - "$out/run/metrics.jsonl" <<'PY'
import json, statistics, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if "loss" in r and "step_s" in r][3:]
print(f"{statistics.median(r['step_s'] for r in rows) * 1e3:.1f}")
PY
}

ratios=()
for ((r = 0; r < rounds; ++r)); do
  if ((r % 2 == 0)); then ta=$(run "$a" "$@"); tb=$(run "$b" "$@"); else
    tb=$(run "$b" "$@"); ta=$(run "$a" "$@"); fi
  ratio=$(python3 -c "print(f'{$ta / $tb:.3f}')")
  ratios+=("$ratio")
  echo "round $r: A $ta ms, B $tb ms, A/B $ratio"
done
python3 -c "import statistics, sys; print(f'median A/B over $rounds rounds: {statistics.median(map(float, sys.argv[1:])):.3f}')" "${ratios[@]}"
