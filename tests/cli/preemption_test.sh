#!/usr/bin/env bash
# A run never loses its work: SIGTERM to the launcher or to one rank stops every rank after the
# same step with a checkpoint (exit 143), --resume then ends with the parameters of an
# uninterrupted run; a killed rank with --max-restarts 1 (of loom train --nproc, or of loom
# launch) restarts from the checkpoint and ends the same. Parameters are compared in the final checkpoints, tensor by tensor
# (same_params.py, with the torch of loom's virtual environment).
# usage: preemption_test.sh LOOM_BINARY gloo|mpi
set -u
loom=$1
comm=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
fails=0
passes=0
steps=24
cfg="$tmp/small.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$cfg" <<'TOML'
[train]
global_batch = 8
[output]
progress = false
TOML
# The emulated latency slows each step (~0.1 s) so that a signal lands mid-run; it changes no
# number.
run=(train --config "$cfg" --nproc 2 --comm "$comm" --steps "$steps" --emulate.latency 5ms)

fail() { echo "FAIL $1"; shift; cat "$@"; fails=$((fails + 1)); }
ok() { echo "ok   $1"; passes=$((passes + 1)); }
final() { echo "$1/checkpoint/step-$(printf %06d "$steps")"; }
python="${LOOM_VENV:-$HOME/.local/share/loom/venv}/bin/python"
# Runs whose final parameters must equal the uninterrupted run's, with what to print; checked
# together at the end (one Python start).
compare_dirs=()
compare_names=()
compare() {
  compare_dirs+=("$(final "$1")")
  compare_names+=("$2")
}
# wait_step DIR K: until rank 0 has logged step K (at most 60 s).
wait_step() {
  for _ in $(seq 600); do
    grep -q "\"step\": $2," "$1/metrics.jsonl" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
# The ranks' pids: children of the launcher, or of mpirun under it.
rank_pids() {
  local kids
  kids=$(pgrep -P "$1")
  if [[ $comm == mpi ]]; then pgrep -P "$kids"; else echo "$kids"; fi
}

timeout 120 "$loom" "${run[@]}" --output.dir "$tmp/ref" >"$tmp/ref.out" 2>"$tmp/ref.err" ||
  fail "reference run" "$tmp/ref.err"

# stopped NAME DIR RC: exit 143, one line naming a checkpoint that exists; prints its step
# (on failure: the reason, on stderr).
stopped() {
  local name=$1 dir=$2 rc=$3 line step
  line=$(grep "^loom: stopped by SIGTERM after step" "$dir.err")
  step=$(sed -n 's/^loom: stopped by SIGTERM after step \([0-9]*\);.*/\1/p' <<<"$line")
  local want
  want="checkpoint in $dir/checkpoint/step-$(printf %06d "${step:-0}"); resume with --resume $dir/checkpoint"
  if [[ $rc -ne 143 || $(grep -c "^loom: stopped" "$dir.err") -ne 1 || -z $step ]] ||
     ! grep -qF "$want" <<<"$line" || [[ ! -f $dir/checkpoint/step-$(printf %06d "$step")/manifest.json ]]; then
    { echo "FAIL $name: rc=$rc (expected 143), line '$line'"; cat "$dir.err"; } >&2
    return 1
  fi
  echo "$step"
}

# resumed DIR NAME STEP: --resume DIR/checkpoint runs to the end.
resumed() {
  timeout 120 "$loom" "${run[@]}" --output.dir "$1" --resume "$1/checkpoint" >"$1.out2" 2>"$1.err2"
  local rc=$?
  if [[ $rc -eq 0 ]]; then
    compare "$1" "$2: stopped after step $3 (exit 143), resumed to the uninterrupted run's parameters"
  else
    fail "$2: resume rc=$rc" "$1.err2"
  fi
}

# sigterm_case NAME FOLDER launcher|rank: SIGTERM, after a random early step, to the launcher or
# to its last rank only; every rank must stop after the same step with a checkpoint, and
# --resume must then end with the uninterrupted run's parameters.
sigterm_case() {
  local name=$1 d="$tmp/$2" k pid target what rc step
  k=$((2 + RANDOM % (steps / 2)))
  "$loom" "${run[@]}" --output.dir "$d" >"$d.out" 2>"$d.err" &
  pid=$!
  wait_step "$d" "$k"
  if [[ $3 == launcher ]]; then
    target=$pid what="sent after step $k"
  else
    target=$(rank_pids "$pid" | tail -1) what="pid $target"
  fi
  kill -TERM "$target"
  wait "$pid"
  rc=$?
  if step=$(stopped "$name" "$d" "$rc"); then
    resumed "$d" "$name ($what)" "$step"
  else
    fails=$((fails + 1))
  fi
}
sigterm_case launcher_sigterm term launcher
sigterm_case one_rank_sigterm one rank

# Ctrl-C twice: the second SIGINT stops at once, exit 130, no checkpoint line (slow steps: the
# first one alone could not have finished its step in between).
d="$tmp/int2"
"$loom" "${run[@]}" --emulate.latency 200ms --output.dir "$d" >"$d.out" 2>"$d.err" &
pid=$!
wait_step "$d" 1
kill -INT "$pid"
sleep 0.05
kill -INT "$pid"
start=$SECONDS
wait "$pid"
rc=$?
if [[ $rc -eq 130 && $((SECONDS - start)) -lt 10 ]] && ! grep -q "^loom: stopped" "$d.err"; then
  ok "sigint_twice: exit 130 at once"
else
  fail "sigint_twice: rc=$rc (expected 130) after $((SECONDS - start)) s" "$d.err"
fi

# restart_case NAME FOLDER RANK STEP PATTERN [FLAG...]: rank RANK is killed at step STEP (first
# attempt only) under --max-restarts 1; the run must end (exit 0) after one restart whose line
# matches PATTERN, with the uninterrupted run's parameters.
restart_case() {
  local name=$1 d="$tmp/$2" rank=$3 step=$4 pattern=$5 rc line
  shift 5
  LOOM_FAULT_RANK=$rank LOOM_FAULT_STEP=$step timeout 120 "$loom" "${run[@]}" --output.dir "$d" \
    "$@" --max-restarts 1 >"$d.out" 2>"$d.err"
  rc=$?
  line=$(grep "restart 1 of 1" "$d.err")
  if [[ $rc -eq 0 ]] && grep -q "$pattern" <<<"$line"; then
    compare "$d" "$name: $line; the uninterrupted run's parameters"
  else
    fail "$name: rc=$rc, line '$line'" "$d.err"
  fi
}

# A rank killed at step 7: one restart from the checkpoint of step 6. (mpirun reports a killed
# rank as its exit code 137 = 128 + SIGKILL.)
restart_case restart restart 1 7 \
  "failed (.*\(signal 9\|code 137\).*); restart 1 of 1 from step-000006$" \
  --output.checkpoint_every 3

# Killed before any checkpoint (gloo only, the launcher is the same): the restart starts
# afresh in the failed attempt's folder.
if [[ $comm == gloo ]]; then
  restart_case restart_fresh fresh 0 1 "restart 1 of 1 from the start$"
  # A job that began from another folder's checkpoint (the restart case's step 21), killed
  # before its own first checkpoint: the restart begins again from that checkpoint, over the
  # failed attempt's output (that folder holds no run of another).
  restart_case restart_resumed resumed 1 22 \
    "restart 1 of 1 from $tmp/restart/checkpoint/step-000021$" \
    --resume "$tmp/restart/checkpoint/step-000021"
  # The same under `loom launch --max-restarts` (the launcher of several machines, here one):
  # the restarted ranks find the job's newest checkpoint themselves (LOOM_JOB_START).
  d="$tmp/launched"
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=7 timeout 120 "$loom" launch --nproc 2 --max-restarts 1 -- \
    "$loom" train --config "$cfg" --comm gloo --steps "$steps" --emulate.latency 5ms \
    --output.checkpoint_every 3 --output.dir "$d" >"$d.out" 2>"$d.err"
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q "attempt 0 failed (rank 1 killed by signal 9 (Killed)); restart 1 of 1$" "$d.err" &&
    grep -q "restart 1: going on from step-000006$" "$d.err"; then
    compare "$d" "launch --max-restarts: $(grep "attempt 0 failed" "$d.err"); the uninterrupted run's parameters"
  else
    fail "launch --max-restarts: rc=$rc" "$d.err"
  fi
  # Under `loom launch`, a job that began from that checkpoint and saves every step, killed
  # after its step 23: the restart goes on from the job's own step 23, not from where it began.
  d="$tmp/launched-resumed"
  LOOM_FAULT_RANK=1 LOOM_FAULT_STEP=23 timeout 120 "$loom" launch --nproc 2 --max-restarts 1 -- \
    "$loom" train --config "$cfg" --comm gloo --steps "$steps" --emulate.latency 5ms \
    --output.checkpoint_every 1 --resume "$tmp/restart/checkpoint/step-000021" \
    --output.dir "$d" >"$d.out" 2>"$d.err"
  rc=$?
  if [[ $rc -eq 0 ]] && grep -q "restart 1: going on from step-000023$" "$d.err"; then
    compare "$d" "launch --max-restarts of a resumed job: $(grep "going on from" "$d.err"); the uninterrupted run's parameters"
  else
    fail "launch --max-restarts of a resumed job: rc=$rc" "$d.err"
  fi
fi

"$python" -W ignore "$(dirname "$0")/same_params.py" "$(final "$tmp/ref")" "${compare_dirs[@]}" \
  >"$tmp/compare" 2>&1
for i in "${!compare_dirs[@]}"; do
  if grep -qF "${compare_dirs[$i]}" "$tmp/compare" || ! grep -q "^compared" "$tmp/compare"; then
    fail "${compare_names[$i]%%:*}: parameters differ from the uninterrupted run's" "$tmp/compare"
  else
    ok "${compare_names[$i]}"
  fi
done

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
