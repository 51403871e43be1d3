#!/usr/bin/env bash
# Soak of checkpoints on hosts without a shared run folder (docs/multi-host.md): two hosts of
# the namespace bed (scripts/hosts.sh), two ranks each (pp 2 x dp 2), each host's run folder its
# own, a checkpoint every step. Each round kills every process of one host (SIGKILL, the host
# chosen in turn) at a random moment after the first checkpoint, often inside a save (its own
# write, a copy on the way, a manifest), and leaves both folders as the kill left them. Then
# both hosts resume the run from their own folders. Every resume must end where an
# uninterrupted run ends: the last checkpoint's rank files byte for byte the same on both hosts
# (the CRC-32s of their manifests against the reference run's), no process left behind.
# Prints one line a round (the kill's moment, the step each host's `latest` named, what the
# resume said it fetched) and the count of rounds that ended where the reference did.
# MODE lost: the killed host also loses its disk (its folder emptied) and is killed again at a
# random moment of the resume that fetches its files back (often inside the fetch: temporary
# files of an arriving copy left behind), before the resume that must end where the reference
# did.
# SAVES async: checkpoints written in the background (output.async_save: the copies too).
# Needs root. usage: bench/private_kill_soak.sh [BUILD_DIR] [ROUNDS] [RATE|none] [kill|lost]
#   [SAVES]
set -uo pipefail
build=${1:-build}
rounds=${2:-10}
rate=${3:-none}
mode=${4:-kill}
saves=${5:-sync}
cd "$(dirname "$0")/.." || exit 1
export LOOM_COMM_TIMEOUT_S=10
# shellcheck source=bench/bed_lib.sh
source bench/bed_lib.sh "$build" looms "$rate"
steps=10

# bench/gpt_checkpoints.toml at width 192, 4 heads: 3.6M parameters; with AdamW a rank file holds
# its pipeline stage's half of them with both moments, about 22 MB, so a save (own write, the
# copy, the manifests) takes a while.
cfg=$PWD/bench/gpt_checkpoints.toml
shape=(--model.width 192 --model.heads 4 --train.steps "$steps" --train.final_eval false
  --output.checkpoint_every 1 --output.keep 2)
[[ $saves == async ]] && shape+=(--output.async_save true)

# start NAME PORT [ARGS...]: both hosts' launchers in the background, host K's folder $tmp/NAME.hK
# mounted at $tmp/run (pids in $pids).
start() {
  local name=$1 port=$2 k
  shift 2
  pids=()
  mkdir -p "$tmp/run" "$tmp/$name.h0" "$tmp/$name.h1"
  for k in 0 1; do
    # In a subshell whose own stderr (the shell's "Killed" line for a killed host) is dropped.
    (on_host "$k" "$tmp/$name.h$k" "$loom" launch --nproc 2 --nnodes 2 --node-rank "$k" \
      --master-addr "$master" --master-port "$port" -- "$loom" train --config "$cfg" "${shape[@]}" --pp 2 --dp 2 \
      --output.dir "$tmp/run/out" "$@" >>"$tmp/$name.log$k" 2>&1; exit $?) 2>/dev/null &
    pids+=($!)
  done
}

# finish SECONDS: waits for $pids (killing what is left after SECONDS); their codes in $rcs.
finish() {
  local p i
  for ((i = 0; i < $1 * 10; i++)); do
    kill -0 "${pids[@]}" 2>/dev/null || break
    sleep 0.1
  done
  rcs=()
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
    wait "$p" 2>/dev/null
    rcs+=($?)
  done
}

# crcs FOLDER: the CRC-32s of the last checkpoint's rank files, in rank order.
crcs() {
  python3 - "$1/out/checkpoint/step-$(printf %06d $steps)/manifest.json" <<'PY'
import json, sys
try:
    print(" ".join(str(f["crc32"]) for f in json.load(open(sys.argv[1]))["files"]))
except OSError:
    print("none")
PY
}

latest() { cat "$1/out/checkpoint/latest" 2>/dev/null || echo none; }

# processes left in either host's namespace
left() { ip netns pids "$LOOM_HOSTS_PREFIX-h0"; ip netns pids "$LOOM_HOSTS_PREFIX-h1"; }

# first_checkpoint NAME: waits (up to 60 s) until both hosts of run NAME hold step 1's manifest.
first_checkpoint() {
  local i
  for ((i = 0; i < 600; i++)); do
    [[ -f $tmp/$1.h0/out/checkpoint/step-000001/manifest.json &&
      -f $tmp/$1.h1/out/checkpoint/step-000001/manifest.json ]] && return 0
    sleep 0.1
  done
  return 1
}

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }

port=29900
start ref $((port++))
first_checkpoint ref
t1=$(now)
finish 300
rest=$(since "$t1")  # from the first checkpoint to the end: where the kills fall
want=$(crcs "$tmp/ref.h0")
if [[ ${rcs[*]} != "0 0" || $want == none || $(crcs "$tmp/ref.h1") != "$want" ]]; then
  cat "$tmp/ref.log0" "$tmp/ref.log1" >&2
  echo "the reference run failed (exits ${rcs[*]})" >&2
  exit 1
fi
echo "reference: $steps steps, $rest s from the first checkpoint to the end; the last checkpoint's CRC-32s $want"

good=0
mid_save=0
for ((r = 0; r < rounds; r++)); do
  victim=$((r % 2))
  name=round$r
  start "$name" $((port++))
  # After the first checkpoint (both hosts' manifests), a random moment of the rest of the run.
  first_checkpoint "$name"
  delay=$(python3 -c "import random, sys; print(f'{random.uniform(0, float(sys.argv[1]) * 0.8):.2f}')" "$rest")
  sleep "$delay"
  # shellcheck disable=SC2046 # one pid a word
  kill -KILL $(ip netns pids "$LOOM_HOSTS_PREFIX-h$victim") 2>/dev/null
  finish 60
  killed="${rcs[*]}"
  at="h0 $(latest "$tmp/$name.h0"), h1 $(latest "$tmp/$name.h1")"
  debris=$(find "$tmp/$name.h0" "$tmp/$name.h1" -name '*.tmp*' | wc -l)
  # Step folders without a manifest: saves the kill cut short (on either host).
  unfinished=$(find "$tmp/$name.h0" "$tmp/$name.h1" -mindepth 3 -maxdepth 3 -type d -name 'step-*' \
    '!' -exec test -e '{}/manifest.json' ';' -printf '%f\n' | sort -u | tr '\n' ' ')
  if [[ -n $(left) ]]; then
    echo "round $r: processes left after the kill: $(left | tr '\n' ' ')"
    # shellcheck disable=SC2046 # one pid a word
    kill -KILL $(left) 2>/dev/null
  fi
  resume=()
  [[ $(latest "$tmp/$name.h0") != none || $(latest "$tmp/$name.h1") != none ]] &&
    resume=(--resume "$tmp/run/out/checkpoint")
  lost=""
  if [[ $mode == lost && ${#resume[@]} -gt 0 ]]; then
    # The victim's disk is lost; it is killed again while the resume fetches its files back.
    rm -rf "$tmp/$name.h$victim"/*
    start "$name" $((port++)) "${resume[@]}"
    # Its fetch ends about 2 s into the resume here (the launch and the meeting come first).
    again=$(python3 -c "import random; print(f'{random.uniform(0.5, 2.5):.2f}')")
    sleep "$again"
    # shellcheck disable=SC2046 # one pid a word
    kill -KILL $(ip netns pids "$LOOM_HOSTS_PREFIX-h$victim") 2>/dev/null
    finish 60
    partial=$(find "$tmp/$name.h$victim" -name 'rank-*.tmp*' | wc -l)
    lost="; its disk lost, killed again $again s into the resume (launchers exited ${rcs[*]}, $(find "$tmp/$name.h$victim" -name 'rank-*.pt' | wc -l) rank files and $partial temporary ones in its folder)"
    # shellcheck disable=SC2046 # one pid a word
    [[ -n $(left) ]] && kill -KILL $(left) 2>/dev/null
  fi
  start "$name" $((port++)) "${resume[@]}"
  finish 300
  got0=$(crcs "$tmp/$name.h0")
  got1=$(crcs "$tmp/$name.h1")
  fetched=$(grep -ho "fetched [0-9]* checkpoint files ([0-9]* bytes)" "$tmp/$name.log0" "$tmp/$name.log1" | head -1)
  # What the kill left behind is gone once the run went on (temporary names).
  stale=$(find "$tmp/$name.h0" "$tmp/$name.h1" -name '*.tmp*' | wc -l)
  [[ -n $unfinished ]] && mid_save=$((mid_save + 1))
  outcome="FAIL"
  if [[ ${rcs[*]} == "0 0" && $got0 == "$want" && $got1 == "$want" && -z $(left) && $stale == 0 ]]; then
    outcome="ok"
    good=$((good + 1))
  fi
  echo "round $r: $outcome; host $victim killed $delay s after step 1 (launchers exited $killed), latest: $at, unfinished: ${unfinished:-none}, $debris temporary files$lost; resume exits ${rcs[*]}${fetched:+, $fetched}, $stale temporary files after it"
  if [[ $outcome == FAIL ]]; then
    echo "  crc h0: $got0; h1: $got1"
    tail -3 "$tmp/$name.log0" "$tmp/$name.log1" | sed 's/^/  /'
  fi
  rm -rf "$tmp/$name.h0" "$tmp/$name.h1"
done
echo "$good of $rounds rounds ended where the uninterrupted run did ($mid_save kills cut a save short)"
[[ $good -eq $rounds ]]
