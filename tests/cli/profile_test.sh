#!/usr/bin/env bash
# loom profile writes a cluster file that loom simulate reads: block times alone, the loaded
# slowdown measured with the other cores busy (and no stalled load), and the shared cores
# named in the breakdown. Short timings: this checks the plumbing, not the numbers.
# usage: profile_test.sh LOOM_BINARY SOURCE_DIR
set -u
loom=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
fail() { echo "FAIL: $*"; exit 1; }

"$loom" profile --out "$tmp/c.toml" --config "$src/configs/gpt-fortunes.toml" --seconds 0.05 \
  --micro-batch-sizes 2,4 --no-comm > "$tmp/stdout" 2> "$tmp/stderr" ||
  { cat "$tmp/stderr"; fail "loom profile exited with $?"; }
grep -q "warning" "$tmp/stderr" && { cat "$tmp/stderr"; fail "the profile warned"; }
blocks=$(grep -c '^\[\[block\]\]' "$tmp/c.toml")
[[ $blocks == 12 ]] || fail "expected 12 blocks (3 kinds x 2 sizes x tp 1 and 2), got $blocks"
shards=$(grep -c '^tp = 2$' "$tmp/c.toml")
[[ $shards == 6 ]] || fail "expected 6 tp 2 shards, got $shards"
grep -q '^shared = true' "$tmp/c.toml" || fail "the cluster file does not say the cores are shared"
# Every slowdown written is a ratio >= 1 (absent = 1).
awk -F' = ' '/^loaded_slowdown/ { if ($2 < 1 || $2 > 10) bad = 1 } END { exit bad }' "$tmp/c.toml" ||
  fail "loaded_slowdown out of range: $(grep loaded_slowdown "$tmp/c.toml" | tr '\n' ' ')"
! grep -q '^ns_per_param = 0$' "$tmp/c.toml" || fail "optimizer not measured"
# What an action costs beyond its blocks: measured on a stack of the model's 4 layers, said so
# in the note; written on whole layers only (absent where the difference was not positive).
grep -q 'action_ms: 4 layers run as one-layer actions' "$tmp/c.toml" ||
  fail "the note does not say how action_ms was measured"
awk '/^\[\[block\]\]/ { k = ""; t = 1 } /^kind/ { k = $3 } /^tp/ { t = $3 }
     /^action_ms/ { if (k != "\"layer\"" || t != 1 || $3 <= 0 || $3 > 100) bad = 1 } END { exit bad }' \
  "$tmp/c.toml" || fail "action_ms on another block than a whole layer, or out of range"
# Twice as many processes as cores (here forked: --no-comm): beyond a fair share, a ratio >= 1
# (written when above 1).
cores=$(getconf _NPROCESSORS_ONLN)
grep -q "among $((2 * cores)) forked processes on $cores cores: x[0-9.]* alone" "$tmp/stderr" ||
  { cat "$tmp/stderr"; fail "no time-shared measurement with forked processes"; }
awk -F' = ' '/^oversubscribed/ { if ($2 < 1 || $2 > 10) bad = 1 } END { exit bad }' "$tmp/c.toml" ||
  fail "oversubscribed out of range: $(grep '^oversubscribed' "$tmp/c.toml")"
"$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --pp 2 \
  --cluster "$tmp/c.toml" > "$tmp/sim" 2>&1 || { cat "$tmp/sim"; fail "loom simulate failed"; }
grep -q "compute costs *profiled; 2 rank(s) share $(getconf _NPROCESSORS_ONLN) core(s)" "$tmp/sim" ||
  { cat "$tmp/sim"; fail "the breakdown does not name the profiled, shared compute costs"; }
"$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --tp 2 \
  --cluster "$tmp/c.toml" > "$tmp/sim-tp" 2>&1 || { cat "$tmp/sim-tp"; fail "loom simulate --tp 2 failed"; }
grep -q "compute costs *profiled as tp 2 shards" "$tmp/sim-tp" ||
  { cat "$tmp/sim-tp"; fail "simulate --tp 2 does not use the profiled shards"; }
# The links between two ranks of loom itself and one rank's compute while the other computes:
# measured values, not --no-comm's placeholders. Under mpirun where loom has MPI, and over
# Gloo under loom's own launcher (a build without MPI, or LOOM_COMM=gloo).
links_measured() {  # label, then the environment for loom profile
  local label=$1
  shift
  env "$@" "$loom" profile --out "$tmp/m.toml" --config "$src/configs/gpt-fortunes.toml" \
    --seconds 0.05 --micro-batch-sizes 2 --tp 1 > "$tmp/stdout" 2> "$tmp/stderr" ||
    { cat "$tmp/stderr"; fail "$label: loom profile with links exited with $?"; }
  grep -q "every core busy: x[0-9.]* (two ranks)" "$tmp/stderr" ||
    { cat "$tmp/stderr"; fail "$label: no slowdown measured between two ranks"; }
  # Twice as many ranks as cores, started as loom train starts them, calibrating as a run does.
  grep -q "among $((2 * cores)) ranks on $cores cores: x[0-9.]* alone, x[0-9.]* its fair share" \
    "$tmp/stderr" || { cat "$tmp/stderr"; fail "$label: no time-shared measurement on ranks"; }
  grep -q "oversubscribed: the layer among $((2 * cores)) ranks" "$tmp/m.toml" ||
    fail "$label: the note does not say how oversubscribed was measured"
  awk '/^\[intra\]/ { s = 1 } s && /^bandwidth_gbs/ { b = $3 } s && /^latency_us/ { l = $3; s = 0 }
       END { exit !(b > 0.01 && b != 10 && l > 0 && l != 50) }' "$tmp/m.toml" ||
    { grep -A3 '^\[intra\]' "$tmp/m.toml"; fail "$label: the link was not measured"; }
  grep -q "p2p via loom::comm ($label)" "$tmp/m.toml" || fail "$label: the note does not name the backend"
  # A short run on two ranks: the CPU it used beside its compute, a ratio >= 1.
  grep -q "runtime_cpu: a 12-step run on 2 ranks" "$tmp/m.toml" ||
    { cat "$tmp/stderr"; fail "$label: the run's CPU beside its compute was not measured"; }
  awk -F' = ' '/^runtime_cpu/ { if ($2 < 1 || $2 > 10) bad = 1 } END { exit bad }' "$tmp/m.toml" ||
    fail "$label: runtime_cpu out of range: $(grep '^runtime_cpu' "$tmp/m.toml")"
}
links_measured gloo LOOM_COMM=gloo
if "$loom" doctor 2>/dev/null | grep -q '^  backends *mpi'; then links_measured mpi; fi
# A Llama's blocks: marked as its own, and used for a Llama of that shape only.
sed 's/^kind = "gpt"/kind = "llama"\nkv_heads = 2/' "$src/configs/gpt-fortunes.toml" >"$tmp/llama.toml"
"$loom" profile --out "$tmp/l.toml" --config "$tmp/llama.toml" --seconds 0.05 \
  --micro-batch-sizes 2 --tp 1 --no-comm --alone > "$tmp/stdout" 2> "$tmp/stderr" ||
  { cat "$tmp/stderr"; fail "loom profile of a llama exited with $?"; }
[[ $(grep -c '^model = "llama"$' "$tmp/l.toml") == 3 ]] || fail "expected 3 llama blocks"
grep -q '^ffn_width = 384$' "$tmp/l.toml" || fail "no SwiGLU width in the llama blocks"
"$loom" simulate --from-config "$tmp/llama.toml" --cluster "$tmp/l.toml" > "$tmp/sim-l" 2>&1 &&
  grep -q "compute costs *profiled" "$tmp/sim-l" ||
  { cat "$tmp/sim-l"; fail "simulate does not use the llama's profiled blocks"; }
"$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$tmp/l.toml" \
  > "$tmp/sim-g" 2>&1 && grep -q "compute costs *analytic" "$tmp/sim-g" ||
  { cat "$tmp/sim-g"; fail "a GPT used the llama's blocks"; }
# --device: cuda needs a GPU (one line and exit 2 without), other values are refused, and
# --base only goes with it.
one_line_2() {  # expected-text command...
  local want=$1
  shift
  "$@" > "$tmp/out" 2>&1
  local rc=$?
  [[ $rc == 2 ]] || { cat "$tmp/out"; fail "$* exited with $rc, not 2"; }
  [[ $(grep -c . "$tmp/out") == 1 ]] || { cat "$tmp/out"; fail "$*: more than one line"; }
  grep -q -- "$want" "$tmp/out" || { cat "$tmp/out"; fail "$*: no '$want'"; }
}
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
  one_line_2 "sees no GPU" "$loom" profile --device cuda --base "$src/clusters/h200.toml" --out "$tmp/g.toml"
  [[ -e $tmp/g.toml ]] && fail "a GPU profile without a GPU wrote a file"
fi
one_line_2 "must be cpu or cuda" "$loom" profile --device tpu
one_line_2 "add --device cuda" "$loom" profile --base "$src/clusters/h200.toml"
one_line_2 "not found" "$loom" profile --device cuda --base "$tmp/none.toml"
# A bad --out or --seconds is refused before a minute of measuring, not after it.
one_line_2 "is a folder" timeout 10 "$loom" profile --out "$tmp" --config "$src/configs/gpt-fortunes.toml"
one_line_2 "is a folder" "$loom" profile --device cuda --base "$src/clusters/h200.toml" --out "$tmp"
one_line_2 "--seconds must be more than 0" "$loom" profile --seconds 0
echo "ok: profile -> $blocks blocks; simulate: $(grep 'step time' "$tmp/sim")"
