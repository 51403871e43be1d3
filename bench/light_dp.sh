#!/usr/bin/env bash
# Light data parallelism on a language model (docs/slim-dp.md; results in
# docs/notes/light-dp-results.md): the byte-level GPT of configs/gpt-fortunes.toml on the fortunes
# corpus, 4 ranks of pure data parallelism, the same tokens (steps x global batch) and seed for
# every method: allreduce, slim (two settings), quant 8-bit and 4-bit entropy-coded, powersgd
# (rank 4, 16), diloco (H = 10, 50) and streaming-diloco, on an EMULATED link (loom delays every
# communication as such a link would; it is not a network).
# usage: bench/light_dp.sh [BUILD_DIR] [STEPS] [OUT_DIR]
#   prints markdown tables; writes OUT_DIR/results.json and OUT_DIR/light_dp.svg
# Phase 1: every method's full run (no link emulated): validation loss on the held-out split
# (the whole split after the last step, its full batches at the evaluations before), bytes
# per rank. Phase 2: TIME_STEPS steps of each method on an emulated 1 Gbit/s and 100 Mbit/s
# link; the full run's time on each is extrapolated from them (TIME_STEPS is a multiple of
# every H but 16, so the timed window holds the same share of outer steps as the full run; 6
# meetings of H = 16 in it for 6.25 per 100 steps in the full run). The
# emulation only delays completions: what is trained does not depend on it. METHODS="a b"
# runs a subset; SKIP_FULL=1 / SKIP_TIME=1 reuse runs already in OUT_DIR.
set -euo pipefail
build=${1:-build}
steps=${2:-800}
out=${3:-runs/light-dp}
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--config configs/gpt-fortunes.toml --nproc 4 --dp 4 --steps "$steps" --seed 1234
        --progress false)
declare -A flags=(
  [allreduce]="--dp-mode allreduce"
  [slim-c0.2-e0.1]="--dp-mode slim --slim-core 0.2 --slim-explore 0.1"
  [slim-c0.05-e0.05-t4]="--dp-mode slim --slim-core 0.05 --slim-explore 0.05 --slim-period 4"
  [quant-8bit]="--dp-mode quant --quant-bits 8"
  [quant-4bit]="--dp-mode quant --quant-bits 4"
  [quant-3bit]="--dp-mode quant --quant-bits 3"
  [quant-2bit]="--dp-mode quant --quant-bits 2"
  [quant-2bit-gather4]="--dp-mode quant --quant-bits 2 --quant.gather_bits 4"
  [quant-2bit-gather3]="--dp-mode quant --quant-bits 2 --quant.gather_bits 3"
  [quant-3bit-clip1.8]="--dp-mode quant --quant-bits 3 --quant.rms_clip 1.8"
  [quant-3bit-clip2.5]="--dp-mode quant --quant-bits 3 --quant.rms_clip 2.5"
  [quant-3bit-clip1.3]="--dp-mode quant --quant-bits 3 --quant.rms_clip 1.3"
  [quant-3bit-clip1.0]="--dp-mode quant --quant-bits 3 --quant.rms_clip 1.0"
  [quant-4bit-ent]="--dp-mode quant --quant-bits 4 --quant.entropy true"
  [quant-4bit-clip2.5-ent]="--dp-mode quant --quant-bits 4 --quant.rms_clip 2.5 --quant.entropy true"
  [quant-3bit-clip1.3-ent]="--dp-mode quant --quant-bits 3 --quant.rms_clip 1.3 --quant.entropy true"
  [powersgd-r8]="--dp-mode powersgd --powersgd.rank 8"
  [powersgd-r4]="--dp-mode powersgd --powersgd.rank 4"
  [powersgd-r16]="--dp-mode powersgd --powersgd.rank 16"
  [diloco-h10]="--dp-mode diloco --diloco.inner_steps 10"
  [diloco-h50]="--dp-mode diloco --diloco.inner_steps 50"
  [diloco-h16-avg]="--dp-mode diloco --diloco.inner_steps 16 --diloco.outer_lr 1 --diloco.outer_momentum 0"
  [streaming-h10-f4-4bit]="--dp-mode streaming-diloco --diloco.inner_steps 10 --diloco.fragments 4 --diloco.outer_bits 4 --diloco.overlap 1"
  [streaming-h2-f4-4bit]="--dp-mode streaming-diloco --diloco.inner_steps 2 --diloco.fragments 4 --diloco.outer_bits 4 --diloco.overlap 1"
  [streaming-h4-f4-4bit]="--dp-mode streaming-diloco --diloco.inner_steps 4 --diloco.fragments 4 --diloco.outer_bits 4 --diloco.overlap 1"
  [streaming-h2-f4-4bit-avg]="--dp-mode streaming-diloco --diloco.inner_steps 2 --diloco.fragments 4 --diloco.outer_bits 4 --diloco.overlap 0 --diloco.outer_lr 1 --diloco.outer_momentum 0"
  [streaming-h2-f4-4bit-avg-overlap]="--dp-mode streaming-diloco --diloco.inner_steps 2 --diloco.fragments 4 --diloco.outer_bits 4 --diloco.overlap 1 --diloco.outer_lr 1 --diloco.outer_momentum 0"
  [streaming-h50-f4-4bit]="--dp-mode streaming-diloco --diloco.inner_steps 50 --diloco.fragments 4 --diloco.outer_bits 4 --diloco.overlap 1"
)
read -r -d "" -a order <<<"${METHODS:-allreduce slim-c0.2-e0.1 slim-c0.05-e0.05-t4 quant-8bit quant-4bit-ent powersgd-r4
  powersgd-r16 diloco-h10 diloco-h50 diloco-h16-avg streaming-h10-f4-4bit streaming-h50-f4-4bit}" ||
  true
time_steps=${TIME_STEPS:-100}

# shellcheck source=bench/record_run.sh
source bench/record_run.sh
# run DIR NAME ARGS...: one training run of method NAME into DIR.
run() {
  local dir=$1 name=$2
  shift 2
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  # shellcheck disable=SC2086
  record_run "$dir" "$name" "$build/bin/loom" train "$@" ${flags[$name]} --output.dir "$dir" --overwrite
}

mkdir -p "$out"
if [[ ${SKIP_FULL:-0} != 1 ]]; then
  for name in "${order[@]}"; do
    run "$out/$name" "$name" "${common[@]}" --eval_every $((steps / 8)) --eval_batches 1000
  done
fi
if [[ ${SKIP_TIME:-0} != 1 ]]; then
  for link in 1Gbit 100Mbit; do
    for name in "${order[@]}"; do
      run "$out/time-$link/$name" "$name" "${common[@]}" --steps "$time_steps" --eval_every 0 \
        --emulate-bandwidth "$link"
    done
  done
fi
python3 bench/light_dp_report.py "$out" "$steps" "${order[@]}"
