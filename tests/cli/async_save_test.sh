#!/usr/bin/env bash
# output.async_save: a checkpoint's files are written while the next steps train. On 2 ranks:
# every checkpoint holds the same bytes as the synchronous run's (the state is copied before the
# next step changes it); a write that fails surfaces a step or two later as one line, with
# nothing of the failed checkpoint left and the previous one intact; a non-finite step and a SIGTERM
# complete the checkpoint in flight instead of losing it.
# usage: async_save_test.sh LOOM_BINARY
set -u
loom=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

cfg="$tmp/tiny.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$cfg" <<'TOML'
synthetic_size = 256
[train]
steps = 6
global_batch = 8
eval_batches = 1
[output]
progress = false
checkpoint_every = 1
keep = 10
TOML

train() { "$loom" train --config "$cfg" --nproc 2 --comm gloo "$@" >"$tmp/stdout" 2>"$tmp/stderr"; }
# crcs DIR: each step folder's rank files' checksums, one line a step (empty: none complete).
crcs() {
  local m
  for m in "$1"/checkpoint/step-*/manifest.json; do
    [[ -f $m ]] && echo "$(basename "$(dirname "$m")") $(grep -o '"crc32": *[0-9]*' "$m" | tr -d ' \n')"
  done
}

# The same bytes as a synchronous run's, at every step; rank 0's writer of step 2 starts a second
# late (step 3 trains meanwhile: a writer given the live state would write step 3's values).
train --output.dir "$tmp/sync" || fail "synchronous run"
LOOM_FAULT_RANK=0 LOOM_FAULT_STEP=2 LOOM_FAULT_KIND=slow-write \
  train --output.dir "$tmp/async" --output.async_save true || fail "asynchronous run"
want=$(crcs "$tmp/sync")
got=$(crcs "$tmp/async")
if [[ $(wc -l <<<"$want") -eq 6 && $got == "$want" ]] &&
   ! compgen -G "$tmp/async/checkpoint/step-*/*.tmp*" >/dev/null; then
  ok "6 checkpoints, each rank file the synchronous run's bytes (CRC-32s equal), no temporary file"
else
  fail "async checkpoints differ: sync [$want] async [$got]"
fi

# A rank's write of step 4 fails (disk full): the ranks learn it after step 5 (which trained
# meanwhile) or, if rank 1's writer had not failed by then, at the next save's start (after step
# 6: the save of step 5 first completes step 4's); nothing of step-000004 stays, step-000003 is
# intact and resumes.
run="$tmp/full"
LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=4 LOOM_FAULT_KIND=disk-full \
  train --output.dir "$run" --output.async_save true --steps 8
rc=$?
upto=$(grep -o '^{"step": [0-9]*' "$run/metrics.jsonl" | tail -1 | grep -o '[0-9]*$')
if [[ $rc -ne 0 && $rc -ne 2 ]] && grep -q "No space left on device" "$tmp/stderr" &&
   [[ $(grep -c "step-000004 not written, the last one (step 3) is intact" "$tmp/stderr") -eq 1 &&
      $(grep -c "error" "$tmp/stderr") -eq 1 ]] &&
   grep -q '^{"step": 5,' "$run/metrics.jsonl" && ! grep -q '^{"step": 7,' "$run/metrics.jsonl" &&
   [[ ! -e $run/checkpoint/step-000004 && $(cat "$run/checkpoint/latest") == step-000003 ]] &&
   train --output.dir "$run" --resume "$run/checkpoint" --steps 8; then
  ok "a failed background write: one line after step $upto, nothing of step-000004, step-000003 resumes"
else
  fail "failed background write: rc=$rc; $(ls "$run/checkpoint" 2>&1 | tr '\n' ' ')"
fi

# A non-finite gradient at step 4 (train.on_nan = stop): step 3's checkpoint, in flight, is
# completed before the run stops.
LOOM_FAULT_RANK=0 LOOM_FAULT_STEP=3 LOOM_FAULT_KIND=nan \
  train --output.dir "$tmp/nan" --output.async_save true
rc=$?
if [[ $rc -eq 1 ]] && grep -q "step 4: the loss is .*last checkpoint (step 3) is kept" "$tmp/stderr" &&
   [[ $(cat "$tmp/nan/checkpoint/latest") == step-000003 &&
      $(crcs "$tmp/nan" | tail -1) == $(crcs "$tmp/sync" | sed -n 3p) ]]; then
  ok "on_nan stop: step 3's checkpoint completed, the synchronous run's bytes"
else
  fail "on_nan stop with a save in flight: rc=$rc; latest $(cat "$tmp/nan/checkpoint/latest")"
fi

# SIGTERM: the checkpoint of the step the ranks stop after, begun in the background, is completed
# and named (slow steps: the emulated latency lets the signal land mid-run).
d="$tmp/term"
"$loom" train --config "$cfg" --nproc 2 --comm gloo --steps 40 --emulate.latency 5ms \
  --output.dir "$d" --output.async_save true >"$tmp/stdout" 2>"$tmp/stderr" &
pid=$!
for _ in $(seq 600); do
  grep -q '"step": 3,' "$d/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
step=$(sed -n 's/^loom: stopped by SIGTERM after step \([0-9]*\);.*/\1/p' "$tmp/stderr")
folder="$d/checkpoint/step-$(printf %06d "${step:-0}")"
if [[ $rc -eq 143 && -n $step && -f $folder/manifest.json ]] && grep -qF "checkpoint in $folder" "$tmp/stderr" &&
   [[ $(cat "$d/checkpoint/latest") == $(basename "$folder") ]]; then
  ok "SIGTERM after step $step: its checkpoint completed and named"
else
  fail "SIGTERM with a save in flight: rc=$rc step '$step'"
fi

echo "async_save_test: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
