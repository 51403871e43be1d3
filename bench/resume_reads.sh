#!/usr/bin/env bash
# What a resume reads: the bytes of checkpoint files that all ranks together read (the line
# "the ranks read X of the checkpoint's Y" a resume prints) and the resume's wall time, for the
# GPT of bench/gpt_checkpoints.toml on RANKS local ranks, from checkpoints of pp RANKS and of
# dp RANKS zero3, resumed under the same layout and under the other one. Each resume runs
# twice: with the manifest as written (each file's index checked against the manifest, then
# each MiB of elements a rank reads) and with the manifests' index CRC-32s removed (every file
# a rank opens checked whole first, as loom did before 2026-12-07). The resume loads and trains
# no step (train.steps = the checkpoint's step). Wall times are medians of ROUNDS.
# usage: bench/resume_reads.sh [BUILD_DIR] [RANKS] [ROUNDS]
# shellcheck source=bench/gpt_bench_lib.sh
source "$(dirname "$0")/gpt_bench_lib.sh" 3 "$@"
declare -A layout=([pp]="--pp $ranks" [zero3]="--dp $ranks --dp-mode zero3")

train() {
  # shellcheck disable=SC2086
  "$loom" train --config "$cfg" --nproc "$ranks" --comm gloo --train.steps 2 $1 \
    --output.dir "$2" --overwrite "${@:3}" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
}

for from in pp zero3; do
  train "${layout[$from]}" "$tmp/$from"
  # The same checkpoint, its manifests without the index CRC-32s: checked whole.
  cp -r "$tmp/$from" "$tmp/$from-whole"
  for m in "$tmp/$from-whole"/checkpoint/step-*/manifest.json; do
    sed -i 's/, "index_crc32": [0-9]*//' "$m"
  done
done

echo "$ranks ranks: bytes of checkpoint files read by all ranks together, resume wall time"
echo "| checkpoint | resumed as | checked | read | of the checkpoint | wall (median of $rounds) |"
echo "|---|---|---|---|---|---|"
for from in pp zero3; do
  for to in pp zero3; do
    for check in "as read" whole; do
      src=$tmp/$from
      [ "$check" = whole ] && src=$tmp/$from-whole
      walls=()
      for ((r = 0; r < rounds; r++)); do
        start=$(date +%s.%N)
        train "${layout[$to]}" "$tmp/resumed" --resume "$src/checkpoint"
        walls+=("$(echo "$(date +%s.%N) - $start" | bc)")
      done
      line=$(grep -o "the ranks read .*" "$tmp/log")
      read_=${line#the ranks read }
      read_=${read_%% of the checkpoint*}
      held=${line#*of the checkpoint\'s }
      held=${held% (*}
      wall=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(((rounds + 1) / 2))p")
      printf '| %s %s | %s %s | %s | %s | %s | %.2f s |\n' "$from" "$ranks" "$to" "$ranks" \
        "$check" "$read_" "$held" "$wall"
    done
  done
done
