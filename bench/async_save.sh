#!/usr/bin/env bash
# What a checkpoint costs the run, written at once or in the background (output.async_save):
# the same run on RANKS local ranks (pp RANKS) with no checkpoint but the last ("none"), with one
# every 2 steps written at once ("sync") and in the background ("async"), each round in a
# rotated order and back (A B C C B A). Prints each run's wall time, the median of each, the
# extra time per save against "none" (the last step's save, the same in all, cancels), and the
# median of the runs' peak resident memory (the largest rank's, GNU time's %M of the launcher,
# which counts the ranks it waited for).
# usage: bench/async_save.sh [BUILD_DIR] [ROUNDS] [SAVES] [RANKS] [COMM] [FOLDER]
#   COMM: mpi (default; mpirun binds each of 1 or 2 ranks to one core, which the writer thread
#   then shares with the training) or gloo (loom's launcher: no binding)
#   FOLDER: where the runs write (default: a temporary folder under $TMPDIR)
set -euo pipefail
build=${1:-build}
rounds=${2:-2}
saves=${3:-6}
ranks=${4:-2}
comm=${5:-mpi}
cd "$(dirname "$0")/.."
loom=$PWD/$build/bin/loom
tmp=$(mktemp -d)
out=${6:-$tmp}
trap 'rm -rf "$tmp" "$out/async-bench"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

# bench/gpt_checkpoints.toml: with 2 ranks (pp 2) each rank file is about 86 MB, with one 172 MB.
cfg=$PWD/bench/gpt_checkpoints.toml

# run VARIANT: one run; its wall time (seconds) and peak memory (kB) on stdout.
run() {
  local flags=() start
  case $1 in
    none) flags=(--output.checkpoint_every 0) ;;
    sync) flags=(--output.checkpoint_every 2) ;;
    async) flags=(--output.checkpoint_every 2 --output.async_save true) ;;
  esac
  rm -rf "$out/async-bench"
  start=$(date +%s.%N)
  /usr/bin/time -o "$tmp/rss" -f %M "$loom" train --config "$cfg" --nproc "$ranks" --comm "$comm" --pp "$ranks" \
    --train.steps $((2 * saves + 1)) "${flags[@]}" --output.dir "$out/async-bench" >"$tmp/$1.log" 2>&1 ||
    { cat "$tmp/$1.log" >&2; exit 1; }
  python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$start" "$(date +%s.%N)"
  tail -1 "$tmp/rss"
}

variants=(none sync async)
declare -A times=() peaks=()
for ((r = 0; r < rounds; r++)); do
  order=()
  for ((i = 0; i < 3; i++)); do order+=("${variants[(i + r) % 3]}"); done
  for ((i = 2; i >= 0; i--)); do order+=("${order[i]}"); done
  for v in "${order[@]}"; do
    got=$(run "$v")
    t=${got%%$'\n'*} kb=${got##*$'\n'}
    times[$v]+="$t "
    peaks[$v]+="$kb "
    echo "round $r $v: $t s, peak $((kb / 1024)) MB" >&2
  done
done
args=()
for v in "${variants[@]}"; do args+=("$v=${times[$v]}=${peaks[$v]}"); done
python3 - "$saves" "$ranks" "$comm" "${args[@]}" <<'PY'
import statistics, sys
saves, ranks, comm = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
runs, peaks = {}, {}
for a in sys.argv[4:]:
    v, t, kb = a.split("=")
    runs[v] = [float(x) for x in t.split()]
    peaks[v] = [int(x) / 1024 for x in kb.split()]
none = statistics.median(runs["none"])
print(f"{ranks} ranks (pp {ranks}, {comm}), {saves} saves besides the last")
print("| variant | median | extra per save | peak memory of a rank (median) |")
print("|---|---|---|---|")
for v, t in runs.items():
    print(f"| {v} | {statistics.median(t):.2f} s | {(statistics.median(t) - none) / saves:.3f} s "
          f"| {statistics.median(peaks[v]):.0f} MB |")
print("runs: " + ", ".join(f"{v} {t}" for v, t in runs.items()))
PY
