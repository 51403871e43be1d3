#!/usr/bin/env bash
# Checkpoints that verify themselves and run folders that belong to one run (docs/reliability.md):
# a damaged, foreign or mismatched checkpoint and a folder that holds another run are refused
# with one line and exit 2; --keep, --overwrite, resumed metrics without duplicates, debris
# removed at start, a `latest` that names no complete checkpoint, a full disk that leaves the
# previous checkpoint intact and nothing of the failed one (on 1 rank and on 2), and
# metrics.jsonl of whole lines on a full disk.
# usage: checkpoint_test.sh LOOM_BINARY
set -u
loom=$1
tmp=$(mktemp -d)
mnt="$tmp/full"
trap 'mountpoint -q "$mnt" 2>/dev/null && umount "$mnt"; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

cfg="$tmp/tiny.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$cfg" <<'TOML'
synthetic_size = 256
[train]
steps = 4
global_batch = 8
eval_batches = 1
[output]
progress = false
checkpoint_every = 2
TOML

train() { "$loom" train --config "$cfg" "$@" >"$tmp/stdout" 2>"$tmp/stderr"; }
# refused NAME EXPECTED_SUBSTRING -- TRAIN_FLAGS...: exit 2, one line naming the problem.
refused() {
  local name=$1 want=$2
  shift 3
  train "$@"
  local rc=$? lines
  lines=$(grep -c . "$tmp/stderr")
  if [[ $rc -eq 2 && $lines -eq 1 ]] && grep -qF -- "$want" "$tmp/stderr"; then
    ok "$name: $(cat "$tmp/stderr")"
  else
    fail "$name: rc=$rc, $lines lines, expected 2 and one line with '$want'"
  fi
}
# flip_mid_byte FILE: one bit of the byte in the middle of FILE flipped (among a rank file's
# elements).
flip_mid_byte() {
  python3 - "$1" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2)
    b = f.read(1)[0]
    f.seek(-1, 1)
    f.write(bytes([b ^ 0x40]))
PY
}
# steps_once FILE N: metrics.jsonl has steps 1..N exactly once each, and one summary.
steps_once() {
  local want got
  want=$(seq 1 "$2" | tr '\n' ' ')
  got=$(grep -o '^{"step": [0-9]*, "loss"' "$1" | grep -o '[0-9]*' | tr '\n' ' ')
  [[ $got == "$want" && $(grep -c '"summary"' "$1") -eq 1 ]]
}

A="$tmp/A"
train --output.dir "$A" || fail "first run"
if [[ -d $A/checkpoint/step-000002 && -d $A/checkpoint/step-000004 ]] && steps_once "$A/metrics.jsonl" 4; then
  ok "keep 2 (default): step-000002 and step-000004 kept; metrics steps 1..4"
else
  fail "keep 2: $(ls "$A/checkpoint")"
fi

refused run_folder "holds another run" -- --output.dir "$A"
train --output.dir "$tmp/K" --keep 1 && train --output.dir "$tmp/K" --overwrite --keep 1 --steps 6
if [[ $(ls -d "$tmp/K/checkpoint"/step-* | wc -l) -eq 1 && -d $tmp/K/checkpoint/step-000006 ]] &&
   steps_once "$tmp/K/metrics.jsonl" 6; then
  ok "overwrite + keep 1: one checkpoint (step-000006), metrics of the new run only"
else
  fail "overwrite + keep 1: $(ls "$tmp/K/checkpoint")"
fi

# Resumed from step 2 of a run that went on to step 4: steps 3 and 4 are not repeated, and the
# checkpoint of step 4 (of the course the resume leaves) is moved aside, said in one warning.
cp -r "$A" "$tmp/R"
rm -f "$tmp/R/checkpoint/latest"
train --output.dir "$tmp/R" --resume "$tmp/R/checkpoint/step-000002" --steps 6
if [[ $? -eq 0 ]] && steps_once "$tmp/R/metrics.jsonl" 6 &&
   grep -q "resuming step-000002 of .*, which holds newer checkpoints: the run goes on from step 2; of the course it leaves, step-000004 moved to abandoned-step-000004" "$tmp/stderr" &&
   [[ -f $tmp/R/checkpoint/abandoned-step-000004/manifest.json && $(cat "$tmp/R/checkpoint/latest") == step-000006 ]]; then
  ok "resume: metrics steps 1..6 once each, one summary; $(grep "newer checkpoints" "$tmp/stderr")"
else
  fail "resume metrics: $(grep -o '^{"step": [0-9]*' "$tmp/R/metrics.jsonl" | tr '\n' ' '); $(cat "$tmp/stderr")"
fi
# The same resume killed before its first save: `latest` already names step 2, so resuming the
# run folder goes on from step 2, not from the left course's step 4.
cp -r "$A" "$tmp/R2"
LOOM_FAULT_RANK=0 LOOM_FAULT_STEP=2 train --output.dir "$tmp/R2" \
  --resume "$tmp/R2/checkpoint/step-000002" --steps 6 --lr 0.001
rc=$?
train --output.dir "$tmp/R2" --resume "$tmp/R2" --steps 6 --lr 0.001
rc2=$?
if [[ $rc -ne 0 && $rc2 -eq 0 ]] && cat "$tmp/stdout" "$tmp/stderr" | grep -q "resumed at step 2" &&
   steps_once "$tmp/R2/metrics.jsonl" 6; then
  ok "resume of an older step killed before its first save: the folder resumes at step 2 again"
else
  fail "older step killed before its first save: rc=$rc, then $rc2; $(cat "$tmp/stderr")"
fi

# A run whose checkpoint folder is a link to another disk: its own step folder resumes (not
# taken for another run's checkpoint).
mkdir -p "$tmp/elsewhere" "$tmp/SL" && ln -s "$tmp/elsewhere" "$tmp/SL/checkpoint"
train --output.dir "$tmp/SL" && train --output.dir "$tmp/SL" --resume "$tmp/SL/checkpoint/step-000002" --steps 6
rc=$?
if [[ $rc -eq 0 ]] && steps_once "$tmp/SL/metrics.jsonl" 6 && [[ -d $tmp/elsewhere/abandoned-step-000004 ]]; then
  ok "checkpoint folder behind a link: its step 2 resumes in its run folder"
else
  fail "checkpoint folder behind a link: rc=$rc; $(cat "$tmp/stderr")"
fi

# A resume that changes the run's course names each setting it changes, in one line; another
# layout alone (more micro-batches) continues the same run and says nothing of the kind. The
# settings travel with a consolidated checkpoint.
course="with settings its run did not have"
train --output.dir "$tmp/C1" --resume "$A/checkpoint/step-000002" --lr 0.002 --seed 7 --microbatches 2
if [[ $? -eq 0 && $(grep -c "$course" "$tmp/stderr") -eq 1 ]] &&
   grep -q "$course: train.lr 0.0003 -> 0.002, train.seed 1234 -> 7; from here" "$tmp/stderr"; then
  ok "changed course named: $(grep "$course" "$tmp/stderr")"
else
  fail "changed course: $(cat "$tmp/stderr")"
fi
train --output.dir "$tmp/C2" --resume "$A/checkpoint/step-000002" --microbatches 2 --eval-every 1
if [[ $? -eq 0 ]] && ! grep -q "$course" "$tmp/stderr"; then
  ok "another layout: no change of course reported"
else
  fail "another layout reported: $(cat "$tmp/stderr")"
fi
"$loom" checkpoint convert "$A/checkpoint/step-000002" --out "$tmp/C3" >/dev/null 2>&1 &&
  train --output.dir "$tmp/C4" --resume "$tmp/C3" --lr 0.003
if [[ $? -eq 0 ]] && grep -q "$course: train.lr 0.0003 -> 0.003;" "$tmp/stderr"; then
  ok "a consolidated checkpoint keeps its run's settings"
else
  fail "consolidated checkpoint's settings: $(cat "$tmp/stderr")"
fi

# Debris of a crash during a save: temporary files and a step folder without a manifest.
mkdir -p "$A/checkpoint/step-000009"
touch "$A/checkpoint/latest.tmp4242" "$A/checkpoint/step-000009/rank-00000.pt.tmp" \
      "$A/checkpoint/step-000004/manifest.json.tmp77" "$A/metrics.jsonl.tmp4243" \
      "$A/metrics.jsonl.tmp-r1" "$A/notes.tmp.txt"
train --output.dir "$A" --resume "$A/checkpoint" --steps 5
if [[ $? -eq 0 && -z $(find "$A/checkpoint" -name '*.tmp*') &&
      -z $(find "$A" -maxdepth 1 -name 'metrics.jsonl.tmp*') && -f $A/notes.tmp.txt ]]; then
  ok "debris: .tmp files removed at start (the run folder's metrics.jsonl's too, not a file of another name), resume from latest works"
else
  fail "debris: $(find "$A" -name '*.tmp*')"
fi

# The run's folder stands for its checkpoint folder, in --resume and the other commands.
"$loom" checkpoint info "$A/checkpoint" >"$tmp/info-checkpoint" 2>&1
if "$loom" checkpoint info "$A" >"$tmp/info-run" 2>"$tmp/stderr" &&
   cmp -s "$tmp/info-checkpoint" "$tmp/info-run" &&
   train --output.dir "$tmp/from-run-folder" --resume "$A" --steps 6 &&
   grep -q "resumed at step 5" "$tmp/stderr"; then
  ok "the run's folder stands for its checkpoint folder (checkpoint info, --resume)"
else
  fail "run folder as checkpoint: $(cat "$tmp/stderr")"
fi

# checkpoint gather: started alone it has no host to gather from (exit 2, one line); on one host
# under a launcher every file is in rank 0's folder already, nothing fetched.
"$loom" checkpoint gather "$A" >"$tmp/gather-alone" 2>&1
alone=$?
"$loom" launch --nproc 2 -- "$loom" checkpoint gather "$A" >"$tmp/gather" 2>&1
if [[ $alone -eq 2 && $(wc -l <"$tmp/gather-alone") -eq 1 ]] &&
   grep -q "error: loom checkpoint gather runs one process on each host .* and was started alone" "$tmp/gather-alone" &&
   grep -Eq "\(step 5\): 1 file, all in the folder of rank 0( on [^;]+)?; 0 fetched from other hosts \(0 bytes\)" "$tmp/gather"; then
  ok "checkpoint gather: refused alone, nothing to fetch on one host"
else
  fail "checkpoint gather (alone: exit $alone): $(cat "$tmp/gather-alone"; echo; cat "$tmp/gather")"
fi

# A `latest` that names no complete checkpoint (the newest folder deleted by hand, `latest`
# damaged or missing) or an older one (a save cut short between its manifest and `latest`):
# the newest complete checkpoint is used, with a notice.
for damage in deleted garbage missing older; do
  L="$tmp/L-$damage"
  cp -r "$A" "$L"
  case $damage in
    deleted) rm -rf "$L/checkpoint/$(cat "$L/checkpoint/latest")" ;;
    garbage) echo "step-9x" >"$L/checkpoint/latest" ;;
    missing) rm "$L/checkpoint/latest" ;;
    older) basename "$(ls -d "$L/checkpoint"/step-* | sort | head -1)" >"$L/checkpoint/latest" ;;
  esac
  want=$(basename "$(ls -d "$L/checkpoint"/step-* | sort | tail -1)")
  train --output.dir "$L" --resume "$L/checkpoint" --steps 7
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q "using the newest complete one, $want" "$tmp/stderr" &&
     cat "$tmp/stdout" "$tmp/stderr" | grep -q "resumed at step $((10#${want#step-}))" &&
     steps_once "$L/metrics.jsonl" 7; then
    ok "latest $damage: $(grep newest "$tmp/stderr")"
  else
    fail "latest $damage: rc=$rc; $(cat "$tmp/stderr")"
  fi
done

# The newest checkpoint damaged (a byte among its elements, found when read; or its rank file cut
# short, found by loom train's own check before the ranks start), resumed from the run's
# checkpoint folder on 1 rank and on 2: the newest checkpoint before it is used, with one
# warning naming the damage, and the run ends as it would have (each step once).
for damage in flipped short; do
  for n in 1 2; do
    R="$tmp/rot-$damage-$n"
    cp -r "$A" "$R"
    newest=$(cat "$R/checkpoint/latest")
    older=$(basename "$(ls -d "$R/checkpoint"/step-* | sort | tail -2 | head -1)")
    file="$R/checkpoint/$newest/rank-00000.pt"
    if [[ $damage == flipped ]]; then
      flip_mid_byte "$file"
      why="does not match its manifest (bytes .*"
    else
      truncate -s -1000 "$file"
      why="is [0-9]* bytes, its manifest says [0-9]*: it is cut short, damaged or from another run"
    fi
    train --nproc "$n" --output.dir "$R" --resume "$R/checkpoint" --steps 7
    rc=$?
    if [[ $rc -eq 0 ]] && [[ $(grep -c "resuming from" "$tmp/stderr") -eq 1 ]] &&
       grep -q "$newest/rank-00000.pt' $why; resuming from $older, the newest checkpoint before it" "$tmp/stderr" &&
       cat "$tmp/stdout" "$tmp/stderr" | grep -q "resumed at step $((10#${older#step-}))" &&
       steps_once "$R/metrics.jsonl" 7; then
      ok "newest checkpoint $damage, $n rank(s): $(grep "resuming from" "$tmp/stderr")"
    else
      fail "newest checkpoint $damage, $n rank(s): rc=$rc; $(cat "$tmp/stderr")"
    fi
  done
done
# The run's metrics.jsonl damaged (a line cut mid-value) or lost before a resume from its own
# folder: the run goes on, one warning says what its history lost, and no damaged line is kept.
for damage in line lost; do
  R="$tmp/hist-$damage"
  cp -r "$A" "$R"
  newest=$(cat "$R/checkpoint/latest")
  at=$((10#${newest#step-}))
  if [[ $damage == line ]]; then
    sed -i '2s/"loss": .*/"loss": 5.7/' "$R/metrics.jsonl"
    why="1 line that is not JSON (damaged) removed; it goes on from step $((at + 1))"
    want=$(seq 1 7 | grep -vx 2 | tr '\n' ' ')
  else
    rm "$R/metrics.jsonl"
    why="it is missing: the lines of steps 1 to $at are lost; it goes on from step $((at + 1))"
    want=$(seq $((at + 1)) 7 | tr '\n' ' ')
  fi
  train --output.dir "$R" --resume "$R/checkpoint" --steps 7
  rc=$?
  got=$(grep -o '^{"step": [0-9]*, "loss"' "$R/metrics.jsonl" | grep -o '[0-9]*' | tr '\n' ' ')
  if [[ $rc -eq 0 && $got == "$want" ]] &&
     grep -qF "resuming at step $at, $R/metrics.jsonl: $why" "$tmp/stderr" &&
     python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$R/metrics.jsonl"; then
    ok "metrics.jsonl $damage before a resume: $(grep "goes on from" "$tmp/stderr")"
  else
    fail "metrics.jsonl $damage before a resume: rc=$rc, steps '$got' (want '$want'); $(cat "$tmp/stderr")"
  fi
done
# Every checkpoint of the run cut short: loom train refuses before any rank starts, naming the
# newest's file (there is nothing to go back to).
R="$tmp/rot-all"
cp -r "$A" "$R"
for f in "$R"/checkpoint/step-*/rank-00000.pt; do truncate -s -1000 "$f"; done
newest=$(cat "$R/checkpoint/latest")
refused all_checkpoints_short "$newest/rank-00000.pt' is " -- --nproc 2 --output.dir "$R" \
  --resume "$R/checkpoint" --steps 7

# Damaged and foreign files, changed settings: refused before any tensor is used.
ck="$A/checkpoint/step-000004"
cp -r "$ck" "$tmp/bad"
printf '\x01\x02\x03\x04\x05\x06\x07\x08' | dd of="$tmp/bad/rank-00000.pt" bs=1 seek=4096 conv=notrunc status=none
refused flipped_bytes "does not match its manifest" -- --output.dir "$tmp/o1" --resume "$tmp/bad"
train --output.dir "$tmp/B" --seed 99 || fail "second run"
cp -r "$ck" "$tmp/foreign"
cp "$tmp/B/checkpoint/step-000004/rank-00000.pt" "$tmp/foreign/rank-00000.pt"
refused foreign_rank_file "does not match its manifest" -- --output.dir "$tmp/o2" --resume "$tmp/foreign"
# A checkpoint past the run's last step: nothing to train (the run's summary would give way to
# an empty one); refused in a lone process and by loom train --nproc before the ranks start.
refused resume_past_steps "checkpoint '$ck' is of step 4, past train.steps = 3; pass --steps above 4" -- \
  --output.dir "$tmp/o15" --resume "$ck" --steps 3
refused resume_past_steps_nproc "checkpoint '$ck' is of step 4, past train.steps = 3" -- \
  --nproc 2 --output.dir "$tmp/o16" --resume "$ck" --steps 3
# Another run's checkpoint resumed into a folder that holds a run (B): refused before anything
# is written (its saves would replace B's checkpoints of the same steps, its metrics join B's);
# with --overwrite, B's run is replaced by the resumed one.
before=$(cd "$tmp/B" && find . -type f -exec md5sum {} + | sort)
refused resume_into_another_run "output folder '$tmp/B' holds another run (metrics.jsonl, checkpoint/), and --resume $ck is not in it" -- \
  --output.dir "$tmp/B" --resume "$ck" --steps 6
[[ $(cd "$tmp/B" && find . -type f -exec md5sum {} + | sort) == "$before" ]] ||
  fail "resume_into_another_run: the refused run changed B's files"
cp -r "$tmp/B" "$tmp/B2"
train --output.dir "$tmp/B2" --resume "$ck" --steps 6 --overwrite
rc=$?
got=$(grep -o '^{"step": [0-9]*, "loss"' "$tmp/B2/metrics.jsonl" | grep -o '[0-9]*' | tr '\n' ' ')
if [[ $rc -eq 0 && $got == "5 6 " && ! -d $tmp/B2/checkpoint/step-000004 && -d $tmp/B2/checkpoint/step-000006 ]]; then
  ok "resume into another run with --overwrite: its metrics and checkpoints replaced (steps $got)"
else
  fail "resume into another run with --overwrite: rc=$rc, steps '$got', $(ls "$tmp/B2/checkpoint"); $(cat "$tmp/stderr")"
fi
# A byte among the elements (mid-file) damaged: a resume checks each MiB of elements it reads
# against the file's index (whose CRC-32 the manifest holds), so it is found when read, under
# the same layout and under another (2 ranks, each reading its part; the one that finds it
# stops both, in one line).
cp -r "$ck" "$tmp/deep"
flip_mid_byte "$tmp/deep/rank-00000.pt"
refused damaged_elements "rank-00000.pt' does not match its manifest (bytes " -- \
  --output.dir "$tmp/o13" --resume "$tmp/deep"
train --nproc 2 --output.dir "$tmp/o14" --resume "$tmp/deep"
rc=$?
if [[ $rc -eq 2 && $(grep -vc "resharding checkpoint" "$tmp/stderr") -eq 1 ]] &&
    grep -qF "rank-00000.pt' does not match its manifest (bytes " "$tmp/stderr"; then
  ok "damaged_elements on 2 ranks: $(grep error "$tmp/stderr")"
else
  fail "damaged_elements on 2 ranks: rc=$rc, $(cat "$tmp/stderr")"
fi
# A rank file cut short or missing: found before any rank starts (on 2 ranks, a rank that
# finds it prints MPI_Abort's banner of 8 lines).
cp -r "$ck" "$tmp/cut"
truncate -s 1000 "$tmp/cut/rank-00000.pt"
refused cut_rank_file "rank-00000.pt' is 1000 bytes, its manifest says" -- --nproc 2 \
  --output.dir "$tmp/o10" --resume "$tmp/cut"
cp -r "$ck" "$tmp/lost"
rm "$tmp/lost/rank-00000.pt"
refused missing_rank_file "rank-00000.pt' is missing" -- --nproc 2 --output.dir "$tmp/o11" \
  --resume "$tmp/lost"
# A rank file that matches its manifest but is not a checkpoint file (written by something
# else, the manifest made to fit): torch's reader fails; one line, without its C++ backtrace.
cp -r "$ck" "$tmp/alien"
head -c "$(stat -c %s "$ck/rank-00000.pt")" /dev/urandom >"$tmp/alien/rank-00000.pt"
python3 - "$tmp/alien" <<'PY'
import json, sys, zlib
d = sys.argv[1]
m = json.load(open(f"{d}/manifest.json"))
data = open(f"{d}/rank-00000.pt", "rb").read()
for f in m["files"]:
    if f["file"] == "rank-00000.pt":
        f["bytes"], f["crc32"] = len(data), zlib.crc32(data)
json.dump(m, open(f"{d}/manifest.json", "w"))
PY
refused alien_rank_file "rank-00000.pt' is not a loom checkpoint file of this format" -- \
  --output.dir "$tmp/o12" --resume "$tmp/alien"
refused heads_changed "model.heads = 2, this run has 4" -- --output.dir "$tmp/o3" --resume "$ck" --heads 4
# A run refused after it made its folder leaves no folder (it held only the run's lock).
if [[ -e "$tmp/o3" || -e "$tmp/o12" ]]; then
  fail "refused runs left their folders: $(ls -A "$tmp/o3" "$tmp/o12" 2>&1 | tr '\n' ' ')"
else
  ok "refused runs left no folder behind"
fi
refused width_changed "model.width = 32, this run has 64" -- --output.dir "$tmp/o4" --resume "$ck" --width 64
refused optimizer_changed "train.optimizer = adamw, this run has sgd" -- --output.dir "$tmp/o5" --resume "$ck" --optimizer sgd
# A manifest cut short, an entry without its CRC-32, a width edited far past what the files
# hold (the model was built, and the allocation failed, before): one line each naming it.
cp -r "$ck" "$tmp/cutjson" && head -c 100 "$ck/manifest.json" >"$tmp/cutjson/manifest.json"
refused manifest_cut_short "is not JSON (cut short or damaged, at byte 100 of 100)" -- \
  --output.dir "$tmp/o13" --resume "$tmp/cutjson"
cp -r "$ck" "$tmp/nocrc" && sed -i 's/, "crc32": [0-9]*//' "$tmp/nocrc/manifest.json"
refused manifest_without_crc32 'lacks "crc32" in the entry of rank 0' -- \
  --output.dir "$tmp/o14" --resume "$tmp/nocrc"
cp -r "$ck" "$tmp/wide" && sed -i 's/"width": [0-9]*/"width": 16000000/' "$tmp/wide/manifest.json"
refused manifest_width_past_files "more than its files hold" -- --output.dir "$tmp/o15" \
  --resume "$tmp/wide"
for step in -7 123456789012345678901234; do
  cp -r "$ck" "$tmp/m$step"
  sed -i "s/\"step\": 4/\"step\": $step/" "$tmp/m$step/manifest.json"
  refused "manifest_step_$step" "it is corrupt" -- --output.dir "$tmp/o7" --resume "$tmp/m$step"
done
# A second run in the folder of a live one (on 2 ranks: the launcher holds the folder for its
# ranks) is refused, with --overwrite too. The launcher killed (SIGKILL), its mpirun and ranks
# stop as if preempted (they ran on, orphaned, before), saving a checkpoint; the folder is then
# free again.
"$loom" train --config "$cfg" --nproc 2 --output.dir "$tmp/live" --steps 100000 \
  --checkpoint-every 0 >/dev/null 2>&1 &
live=$!
for _ in $(seq 100); do [[ -s $tmp/live/metrics.jsonl ]] && break; sleep 0.2; done
refused folder_in_use "output folder '$tmp/live' is in use by another loom run (pid $live on host" \
  -- --output.dir "$tmp/live" --overwrite
kill -9 $live
wait $live 2>/dev/null
for _ in $(seq 60); do pgrep -f "$tmp/live" >/dev/null || break; sleep 0.5; done
if pgrep -f "$tmp/live" >/dev/null; then
  fail "launcher killed: its ranks still run 30 s later: $(pgrep -af "$tmp/live" | head -3)"
  pkill -9 -f "$tmp/live"
elif [[ ! -f $tmp/live/checkpoint/latest ]]; then
  fail "launcher killed: the ranks stopped without a checkpoint"
elif train --output.dir "$tmp/live" --overwrite --steps 2; then
  ok "launcher killed: the ranks stopped with $(cat "$tmp/live/checkpoint/latest"); the folder is free again"
else
  fail "folder of a killed run: rc=$?"
fi
refused no_checkpoint "no checkpoint at" -- --output.dir "$tmp/o8" --resume "$tmp/nowhere"
refused head_bias_changed "model.head_bias = false, this run has true" -- --output.dir "$tmp/o9" \
  --resume "$ck" --model.head_bias true
# A GPT manifest from before model.tie_embeddings and model.head_bias were recorded: that loom's
# GPT had a head bias, so today's default (none) is refused rather than dropping it silently.
cp -r "$ck" "$tmp/older"
sed -i 's/, "tie_embeddings": [01]//; s/, "head_bias": [01]//' "$tmp/older/manifest.json"
if grep -q '"head_bias"' "$tmp/older/manifest.json"; then
  fail "older manifest: head_bias still in it"
else
  refused older_manifest "model.head_bias = true, this run has false" -- --output.dir "$tmp/o10" \
    --resume "$tmp/older"
fi

# A non-finite gradient at step 3 (the loss scale of rank 0 is NaN there).
LOOM_FAULT_RANK=0 LOOM_FAULT_STEP=2 LOOM_FAULT_KIND=nan train --output.dir "$tmp/N1" --steps 6 --checkpoint-every 1
rc=$?
if [[ $rc -eq 1 && $(grep -c "error" "$tmp/stderr") -eq 1 ]] &&
   grep -q "step 3: the loss is .* gradient norm -\?nan; stopped before the update" "$tmp/stderr" &&
   grep -q "last checkpoint (step 2) is kept" "$tmp/stderr" &&
   [[ $(cat "$tmp/N1/checkpoint/latest") == step-000002 && ! -e $tmp/N1/checkpoint/step-000003 ]]; then
  ok "on_nan stop: $(grep error "$tmp/stderr")"
else
  fail "on_nan stop: rc=$rc"
fi
LOOM_FAULT_RANK=0 LOOM_FAULT_STEP=2 LOOM_FAULT_KIND=nan train --output.dir "$tmp/N2" --steps 6 --on-nan skip
rc=$?
last=$(grep '"eval_loss"' "$tmp/N2/metrics.jsonl" | tail -1)
if [[ $rc -eq 0 ]] && steps_once "$tmp/N2/metrics.jsonl" 6 &&
   [[ $(grep -c '"skipped": 1' "$tmp/N2/metrics.jsonl") -eq 1 ]] &&
   grep -q '^{"step": 3, .*"skipped": 1' "$tmp/N2/metrics.jsonl" &&
   [[ $last =~ \"eval_loss\":\ [0-9] ]]; then
  ok "on_nan skip: step 3 skipped, 6 steps, finite eval loss ($last)"
else
  fail "on_nan skip: rc=$rc; $last"
fi

# A full disk: one line naming the file and the reason, the previous checkpoint intact.
mkdir -p "$mnt"
if mount -t tmpfs -o size=1500k tmpfs "$mnt" 2>/dev/null; then
  train --output.dir "$mnt/run" --steps 6 --keep 3
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 2 && $(grep -c "error" "$tmp/stderr") -eq 1 ]] &&
     grep -q "No space left on device" "$tmp/stderr" && grep -q "is intact" "$tmp/stderr" &&
     [[ -f $mnt/run/checkpoint/step-000004/manifest.json && ! -e $mnt/run/checkpoint/step-000006 &&
        -z $(find "$mnt/run" -name '*.tmp*') ]] &&
     "$loom" train --config "$cfg" --output.dir "$tmp/after" --resume "$mnt/run/checkpoint" --steps 5 >/dev/null 2>&1; then
    ok "full disk: $(grep error "$tmp/stderr"); step-000004 resumes"
  else
    fail "full disk: rc=$rc; $(ls -R "$mnt/run/checkpoint" 2>&1 | tr '\n' ' ')"
  fi
  umount "$mnt"
else
  echo "skip full disk: cannot mount a tmpfs here (needs root)"
fi

# A full disk under metrics.jsonl: the run stops with one line, and the file holds whole lines
# only (steps 1..n, each valid JSON), none lost in silence. 32 KB: the lock and config.toml
# (8 KB) take three or four of its 4 KB pages, the 400 steps' lines need ~100 KB.
if mount -t tmpfs -o size=32k tmpfs "$mnt" 2>/dev/null; then
  train --output.dir "$mnt/run" --steps 400 --checkpoint-every 0
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 2 && $(grep -c "error" "$tmp/stderr") -eq 1 ]] &&
     grep -q "metrics.jsonl': No space left on device" "$tmp/stderr" &&
     python3 -c "
import json, sys
steps = [json.loads(l)['step'] for l in open(sys.argv[1])]
sys.exit(not (steps and steps == list(range(1, len(steps) + 1))))" "$mnt/run/metrics.jsonl"; then
    ok "metrics on a full disk: $(grep error "$tmp/stderr"); $(wc -l <"$mnt/run/metrics.jsonl") whole lines"
  else
    fail "metrics on a full disk: rc=$rc; $(cat "$tmp/stderr"); $(tail -c 100 "$mnt/run/metrics.jsonl")"
  fi
  umount "$mnt"
else
  echo "skip metrics on a full disk: cannot mount a tmpfs here (needs root)"
fi

# A full disk under `checkpoint convert` and `export`: nothing of their folders is left (a
# half-written one would refuse the retry as "not an empty folder").
if mount -t tmpfs -o size=100k tmpfs "$mnt" 2>/dev/null; then
  "$loom" checkpoint convert "$ck" --out "$mnt/whole" >"$tmp/stdout" 2>"$tmp/stderr"
  rc_convert=$?
  "$loom" export --checkpoint "$ck" --out "$mnt/hf" >"$tmp/stdout" 2>>"$tmp/stderr"
  rc_export=$?
  if [[ $rc_convert -eq 1 && $rc_export -eq 1 && $(grep -c "No space left on device" "$tmp/stderr") -eq 2 &&
        -z $(ls -A "$mnt") ]]; then
    ok "convert and export on a full disk: nothing left in $(basename "$mnt")"
  else
    fail "convert/export on a full disk: rc=$rc_convert/$rc_export; $(cat "$tmp/stderr"); $(ls -A "$mnt")"
  fi
  umount "$mnt"
else
  echo "skip convert and export on a full disk: cannot mount a tmpfs here (needs root)"
fi

# A failed save on several ranks leaves nothing of the checkpoint it did not write: one rank's
# part fails (the parts the others wrote are removed), or rank 0's manifest (all parts are);
# the rank that failed says so, in the one error line.
for fault in "1 disk-full" "0 manifest-disk-full"; do
  read -r frank kind <<<"$fault"
  run="$tmp/F-$kind"
  LOOM_FAULT_RANK=$frank LOOM_FAULT_STEP=4 LOOM_FAULT_KIND=$kind \
    train --output.dir "$run" --steps 6 --nproc 2 --comm gloo
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 2 ]] && grep -q "No space left on device" "$tmp/stderr" &&
     [[ $(grep -c "step-000004 not written, the last one (step 2) is intact" "$tmp/stderr") -eq 1 && $(grep -c "error" "$tmp/stderr") -eq 1 ]] &&
     [[ ! -e $run/checkpoint/step-000004 && $(cat "$run/checkpoint/latest") == step-000002 ]] &&
     "$loom" train --config "$cfg" --output.dir "$run-after" --resume "$run/checkpoint" --steps 3 >/dev/null 2>&1; then
    ok "$kind on rank $frank of 2: nothing of step-000004 left; step-000002 resumes"
  else
    fail "$kind on rank $frank of 2: rc=$rc; $(ls -R "$run/checkpoint" 2>&1 | tr '\n' ' '); $(grep error "$tmp/stderr")"
  fi
done

echo "checkpoint_test: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
