#!/usr/bin/env bash
# Resharding from the command line (docs/reliability.md): a checkpoint of 4 ranks (dp 2 x pp 2,
# zero3) resumes on 2 ranks with allreduce and says so in one line; `loom checkpoint info`
# checks and describes it; `loom checkpoint convert` writes one file that resumes to the very
# same parameters as the original; a run with the ranks numbered pipeline by pipeline
# (--placement pipeline-inside) trains and resumes to the same parameters; slim into another
# mode or dp starts from the replicas' mean and says so; a damaged file and a convert into a
# folder that holds files are refused with one line and exit 2.
# usage: reshard_test.sh LOOM_BINARY
set -u
loom=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python="${LOOM_VENV:-$HOME/.local/share/loom/venv}/bin/python"
source "$(dirname "$0")/check_lib.sh"

cfg="$tmp/tiny.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$cfg" <<'TOML'
synthetic_size = 256
[train]
steps = 6
global_batch = 8
eval_batches = 1
optimizer = "adamw"
[output]
progress = false
checkpoint_every = 3
TOML

run() { "$@" >"$tmp/stdout" 2>"$tmp/stderr"; }
train() { run "$loom" train --config "$cfg" "$@"; }
# one_line NAME EXPECTED_SUBSTRING: the last command exited 2 with one line naming it.
one_line() {
  local rc=$1 name=$2 want=$3 lines
  lines=$(grep -c . "$tmp/stderr")
  if [[ $rc -eq 2 && $lines -eq 1 ]] && grep -qF -- "$want" "$tmp/stderr"; then
    ok "$name: $(cat "$tmp/stderr")"
  else
    fail "$name: rc=$rc, $lines lines, expected 2 and one line with '$want'"
  fi
}

A="$tmp/A"
train --nproc 4 --dp 2 --pp 2 --dp-mode zero3 --steps 6 --output.dir "$A" || fail "4-rank zero3 run"
ck="$A/checkpoint/step-000003"

# --placement pipeline-inside numbers the ranks pipeline by pipeline: the same training on the
# same groups ends at A's parameters bit for bit; resuming A's checkpoint (written dp-inside)
# so, each rank reads its stages from the files that hold them, not from its own-numbered one.
train --nproc 4 --dp 2 --pp 2 --dp-mode zero3 --steps 6 --placement pipeline-inside \
  --output.dir "$tmp/P" || fail "pipeline-inside run"
train --nproc 4 --dp 2 --pp 2 --dp-mode zero3 --steps 6 --placement pipeline-inside \
  --output.dir "$tmp/P2" --resume "$ck" || fail "pipeline-inside resume of a dp-inside checkpoint"
run "$loom" checkpoint convert "$A/checkpoint" --out "$tmp/Ac"
for p in P P2; do
  run "$loom" checkpoint convert "$tmp/$p/checkpoint" --out "$tmp/${p}c"
  if "$python" -W ignore "$(dirname "$0")/close_params.py" "$tmp/${p}c" "$tmp/Ac" 0 >"$tmp/stdout" 2>&1; then
    ok "placement pipeline-inside ($p) = dp-inside: $(cat "$tmp/stdout")"
  else
    fail "placement pipeline-inside ($p): $(cat "$tmp/stdout")"
  fi
done

train --nproc 2 --dp 2 --dp-mode allreduce --output.dir "$tmp/B" --resume "$ck"
rc=$?
if [[ $rc -eq 0 ]] && grep -q "resharding checkpoint step 3 from dp 2 x pp 2 x loops 1, zero3 to dp 2 x pp 1 x loops 1, allreduce" "$tmp/stderr" &&
  [[ $(grep -c resharding "$tmp/stderr") -eq 1 ]]; then
  ok "dp 2 x pp 2 zero3 -> dp 2 allreduce: resumed, one line says so"
else
  fail "resharded resume: rc=$rc"
fi

if run "$loom" checkpoint info "$ck" && grep -q "layout      dp 2 x pp 2 x loops 1, zero3" "$tmp/stdout" &&
  grep -q "files       4, .* every one matches its size and CRC-32" "$tmp/stdout" &&
  grep -q "partition   4 blocks" "$tmp/stdout"; then
  ok "info: $(grep -c . "$tmp/stdout") lines, layout, files checked, partition"
else
  fail "info: $(cat "$tmp/stdout")"
fi
if run "$loom" checkpoint info "$A/checkpoint" --tensors && grep -q "step        6" "$tmp/stdout" &&
  grep -q "adamw.exp_avg/blocks.1.qkv.weight \[96, 32\]" "$tmp/stdout"; then
  ok "info follows latest; --tensors lists the optimizer state with shapes"
else
  fail "info --tensors: $(head -20 "$tmp/stdout")"
fi

if run "$loom" checkpoint convert "$ck" --out "$tmp/C" && [[ -f $tmp/C/consolidated.pt && -f $tmp/C/manifest.json ]]; then
  ok "convert: $(cat "$tmp/stdout")"
else
  fail "convert"
fi
run "$loom" checkpoint convert "$ck" --out "$tmp/C"
one_line $? "convert into a folder with files" "exists and is not an empty folder"

# The consolidated file and the 4 files it came from resume to the same parameters, bit for bit.
train --nproc 1 --output.dir "$tmp/D1" --resume "$tmp/C" || fail "resume from consolidated"
train --nproc 1 --output.dir "$tmp/D2" --resume "$ck" || fail "resume from 4 files"
if "$python" -W ignore "$(dirname "$0")/same_params.py" "$tmp/D1/checkpoint/step-000006" \
  "$tmp/D2/checkpoint/step-000006" >"$tmp/stdout" 2>"$tmp/stderr"; then
  ok "consolidated and original resume to the same parameters on 1 rank"
else
  fail "consolidated vs original: $(cat "$tmp/stdout")"
fi

# A rank killed at step 5 with --min-nproc 2: the restart runs on 2 ranks from the step-3
# checkpoint of 4 and ends where the uninterrupted 4-rank run ends.
LOOM_FAULT_RANK=3 LOOM_FAULT_STEP=5 LOOM_FAULT_KIND=kill train --nproc 4 --dp-mode zero2 \
  --max-restarts 1 --min-nproc 2 --output.dir "$tmp/R"
rc=$?
if [[ $rc -eq 0 ]] && grep -q "restart 1 of 1 from step-000003 on 2 ranks (was 4)" "$tmp/stderr"; then
  ok "--min-nproc 2: rank 3 killed, restarted on 2 ranks from step 3"
else
  fail "--min-nproc: rc=$rc"
fi
train --nproc 4 --dp-mode zero2 --output.dir "$tmp/U" || fail "uninterrupted 4-rank run"
run "$loom" checkpoint convert "$tmp/R/checkpoint" --out "$tmp/Rc"
run "$loom" checkpoint convert "$tmp/U/checkpoint" --out "$tmp/Uc"
if "$python" -W ignore "$(dirname "$0")/close_params.py" "$tmp/Rc" "$tmp/Uc" 1e-4 >"$tmp/stdout" 2>&1; then
  ok "restarted on 2 ranks = uninterrupted on 4: $(cat "$tmp/stdout")"
else
  fail "restart on fewer ranks: $(cat "$tmp/stdout")"
fi

S="$tmp/S"
train --nproc 2 --dp 2 --dp-mode slim --steps 3 --output.dir "$S" || fail "slim run"
# Slim's replicas each hold a model: another mode or dp starts from their mean, and says so.
k=0
for to in "--nproc 2 --dp 2 --dp-mode allreduce" "--nproc 1 --dp-mode slim"; do
  k=$((k + 1))  # a folder each: one that holds a run takes no other run's checkpoint
  # shellcheck disable=SC2086
  if train $to --output.dir "$tmp/S-again-$k" --resume "$S/checkpoint" &&
      grep -q "the 2 slim replicas' models and optimizer state are averaged" "$tmp/stderr"; then
    ok "slim dp 2 resumed with $to: $(grep -o "resharding.*" "$tmp/stderr" | head -1)"
  else
    fail "slim dp 2 resumed with $to: rc=$?, $(cat "$tmp/stderr")"
  fi
done

cp -r "$ck" "$tmp/bad"
printf 'XXXXXXXX' | dd of="$tmp/bad/rank-00002.pt" bs=1 seek=4000 conv=notrunc status=none
run "$loom" checkpoint info "$tmp/bad"
one_line $? "info on a damaged file" "rank-00002.pt' does not match its manifest"
run "$loom" checkpoint frobnicate "$ck"
one_line $? "unknown subcommand" "needs info, convert or gather"

echo "reshard_test: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
