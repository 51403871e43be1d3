#!/usr/bin/env bash
# Slim-DP vs all-reduce vs quantized all-reduce on Fashion-MNIST (docs/slim-dp.md; results in
# docs/notes/slim-dp-results.md): the CNN of configs/cnn-fashion.toml on 4 ranks, same seed and
# hyperparameters for every mode, each run twice: on this machine's shared memory, then on an
# EMULATED 1 Gbit/s link (loom delays every communication as such a link would; it is not a real
# network).
# usage: bench/slim_fashion.sh [BUILD_DIR] [EPOCHS] [OUT_DIR]
#   prints markdown tables; writes OUT_DIR/results.json and OUT_DIR/accuracy_vs_bytes.svg
# Two phases: (1) the full runs (EPOCHS epochs, local and emulated link), for accuracy, bytes
# and their wall time; (2) timing: TIME_STEPS steps per run, TIME_REPS repetitions interleaved
# across modes, the median reported, because one run's wall time on a machine shared with
# other work is noisy. SKIP_FULL=1 reuses the full runs already in OUT_DIR.
set -euo pipefail
build=${1:-build}
epochs=${2:-3}
out=${3:-runs/slim-fashion}
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
nproc=4
batch=64
steps=$((epochs * 60000 / batch))
# Evaluate on the whole test set (10000 images = 156 batches of 64) four times per epoch.
common=(--config configs/cnn-fashion.toml --nproc $nproc --global_batch $batch --steps $steps
        --eval_every $((60000 / batch / 4)) --eval_batches 156 --seed 1234 --progress false)
declare -A modes=(
  [allreduce]="--dp-mode allreduce"
  [slim-c0.2-e0.1]="--dp-mode slim --slim-core 0.2 --slim-explore 0.1"
  [slim-c0.1-e0.05]="--dp-mode slim --slim-core 0.1 --slim-explore 0.05"
  [quant-8bit]="--dp-mode quant --quant-bits 8"
)
order=(allreduce slim-c0.2-e0.1 slim-c0.1-e0.05 quant-8bit)
time_steps=${TIME_STEPS:-400}
time_reps=${TIME_REPS:-3}

# shellcheck source=bench/record_run.sh
source bench/record_run.sh
# run DIR NAME LINK ARGS...: one training run of mode NAME into DIR.
run() {
  local dir=$1 name=$2 link=$3
  shift 3
  local extra=()
  [[ $link == local ]] || extra=(--emulate-bandwidth 1Gbit)
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  # shellcheck disable=SC2086
  record_run "$dir" "$name ($link)" "$build/bin/loom" train "$@" ${modes[$name]} "${extra[@]}" \
    --output.dir "$dir" --overwrite
}

mkdir -p "$out"
if [[ ${SKIP_FULL:-0} != 1 ]]; then
  echo "Fashion-MNIST CNN, $nproc ranks, $epochs epochs = $steps steps of $batch" >&2
  for name in "${order[@]}"; do
    for link in local emulated-1gbit; do
      run "$out/$name-$link" "$name" "$link" "${common[@]}"
    done
  done
fi
echo "timing: $time_reps x $time_steps steps per mode and link" >&2
timing=(--config configs/cnn-fashion.toml --nproc $nproc --global_batch $batch --steps "$time_steps"
        --eval_every 0 --eval_batches 1 --seed 1234 --progress false)
for rep in $(seq 1 "$time_reps"); do
  for name in "${order[@]}"; do
    for link in local emulated-1gbit; do
      run "$out/time/$name-$link-$rep" "$name" "$link" "${timing[@]}"
    done
  done
done
python3 bench/slim_report.py "$out" "$time_reps" "${order[@]}"
