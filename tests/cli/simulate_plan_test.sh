#!/usr/bin/env bash
# loom simulate and loom plan agree on what they accept and say what they find in one line:
# uneven looped splits refused by both, --json's fits field, plan's exit code when nothing
# fits, --gpus and model flags with --from-config, the recompute and attention choices, the warning for a
# profile of another processor, plan's own lists and table, and its best command trained.
# usage: simulate_plan_test.sh LOOM_BINARY SOURCE_DIR
set -u
loom=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
passes=0
ok() { echo "ok   $1"; passes=$((passes + 1)); }
fail() { echo "FAIL $1"; cat "$tmp/stdout" "$tmp/stderr"; fails=$((fails + 1)); }
# expect_exit2 NAME SUBSTRING -- ARGS: exit 2, one line on stderr containing SUBSTRING
expect_exit2() {
  local name=$1 want=$2
  shift 3
  "$loom" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -qF -- "$want" "$tmp/stderr"; then
    ok "$name: $(cat "$tmp/stderr")"
  else
    fail "$name (exit $rc)"
  fi
}
a100=$src/clusters/a100-80gb.toml
# The shipped profile of a CPU machine without its processor's name: simulate warns (one more
# line) when the machine running the test has another processor.
here=$tmp/this-machine.toml
grep -v '^cpu = ' "$src/clusters/this-machine.toml" >"$here"
gpt=(--model gpt --layers 6 --width 1024 --heads 16 --seq-len 1024 --cluster "$a100")

expect_exit2 uneven_loops "do not split into pp x loops" -- simulate "${gpt[@]}" --gpus 2 --pp 2 \
  --loops 2 --schedule interleaved --microbatches 4
expect_exit2 recompute_value "--recompute must be none, selective or full" -- simulate "${gpt[@]}" \
  --gpus 1 --recompute some
expect_exit2 attention_value "--attention must be standard or flash" -- simulate "${gpt[@]}" \
  --gpus 1 --attention fast
expect_exit2 overlap_needs_sp "add --sequence-parallel" -- simulate "${gpt[@]}" --gpus 2 --tp 2 \
  --tp-comm-overlap
expect_exit2 nothing_fits "No configuration fits" -- plan --model gpt --layers 96 --width 12288 \
  --heads 96 --seq-len 2048 --cluster "$a100" --gpus 8 --global-batch 8 --time-budget 5s
# A budget spent before anything fits is not "nothing fits"; a zero budget or an empty list
# is refused up front.
expect_exit2 budget_spent "within the time budget" -- plan "${gpt[@]}" --gpus 8 \
  --global-batch 8 --time-budget 1us
expect_exit2 budget_zero "--time-budget must be more than 0" -- plan "${gpt[@]}" --gpus 8 \
  --global-batch 8 --time-budget 0
expect_exit2 empty_list "--schedules names nothing" -- plan "${gpt[@]}" --gpus 8 \
  --global-batch 8 --schedules ,

# --json says whether the peak fits in the device's memory.
if "$loom" simulate "${gpt[@]}" --gpus 1 --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"fits":true' "$tmp/stdout"; then ok "json_fits_true"; else fail "json_fits_true"; fi
if "$loom" simulate --model gpt --layers 96 --width 12288 --heads 96 --seq-len 2048 --cluster "$a100" \
  --gpus 8 --tp 8 --micro-batch-size 8 --microbatches 1 --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"fits":false' "$tmp/stdout"; then ok "json_fits_false"; else fail "json_fits_false"; fi

# --json lists every pipeline rank; the largest of their peaks is the step's.
if "$loom" simulate "${gpt[@]}" --gpus 4 --pp 4 --microbatches 8 --json >"$tmp/stdout" \
  2>"$tmp/stderr" && python3 - "$tmp/stdout" <<'PY'; then ok "json_ranks"; else fail "json_ranks"; fi
import json, sys
d = json.load(open(sys.argv[1]))
r = d["ranks"]
assert [x["rank"] for x in r] == [0, 1, 2, 3], r
assert max(x["peak_bytes"] for x in r) == d["peak_bytes"], d
assert r[0]["activation_bytes"] == d["rank0_activation_bytes"], d
assert r[0]["in_flight"] > r[3]["in_flight"], r  # 1F1B: the first rank holds the most
PY

# --gpus with --from-config: dp = gpus / (pp x tp).
if "$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$a100" --gpus 4 \
  --json >"$tmp/stdout" 2>"$tmp/stderr" && grep -q '"configuration":"dp=4 pp=1' "$tmp/stdout"; then
  ok "from_config_gpus"
else fail "from_config_gpus"; fi

# Model flags and --micro-batch-size override the file's model and batch under --from-config.
if "$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$a100" --gpus 8 \
  --pp 8 --layers 12 --microbatches 8 --micro-batch-size 4 --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"configuration":"dp=1 pp=8 tp=1 1f1b m=8 b=4"' "$tmp/stdout"; then
  ok "from_config_model_flags"
else fail "from_config_model_flags"; fi
expect_exit2 batch_not_divisible "not divisible by dp x micro-batch-size = 4" -- simulate \
  "${gpt[@]}" --gpus 1 --global-batch 10 --micro-batch-size 4
expect_exit2 from_config_batch_three "give two of the three" -- simulate --from-config \
  "$src/configs/gpt-fortunes.toml" --cluster "$a100" --microbatches 2 --micro-batch-size 4 \
  --global-batch 64

# output.async_save of --from-config, or --async-save: a copy of each rank's state, in the
# peak of a shared (CPU) cluster (exactly the state: fp32 parameters and AdamW's two moments),
# host memory beside an A100's.
sed 's/^\[output\]$/[output]\nasync_save = true/' "$src/configs/gpt-fortunes.toml" >"$tmp/async.toml"
machine="$src/clusters/this-machine.toml"
if "$loom" simulate --from-config "$tmp/async.toml" --cluster "$machine" --json >"$tmp/with" &&
  "$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$machine" --json \
    >"$tmp/without" &&
  "$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$a100" --async-save \
    >"$tmp/gpu" && grep -q "^  host memory .* an async save's copy" "$tmp/gpu" &&
  python3 - "$tmp/with" "$tmp/without" <<'PY'; then ok "async_save_copy"; else fail "async_save_copy"; fi
import json, sys
w, wo = (json.load(open(f)) for f in sys.argv[1:])
copy = w["rank0_snapshot_bytes"]
assert abs(copy / w["rank0_optimizer_bytes"] - 1.5) < 1e-5, w  # 4 + 8 bytes against AdamW's 8
assert abs((w["peak_bytes"] - wo["peak_bytes"]) / copy - 1) < 1e-4, (w, wo)
assert wo["rank0_snapshot_bytes"] == 0 and w["rank0_host_snapshot_bytes"] == 0, (w, wo)
PY

# Selective recomputation keeps less than none and more than full.
kept() {
  "$loom" simulate "${gpt[@]}" --gpus 1 --recompute "$1" --json |
    sed 's/.*"rank0_kept_activation_bytes":\([0-9.e+]*\).*/\1/'
}
if python3 -c "import sys; n, s, f = map(float, sys.argv[1:]); sys.exit(not n > s > f)" \
  "$(kept none)" "$(kept selective)" "$(kept full)"; then ok "recompute_order"; else fail "recompute_order"; fi

# Llama: simulated and planned; its flags refused for a GPT, a tied head across stages refused.
llama=(--model llama --layers 8 --width 1024 --heads 16 --kv-heads 4 --seq-len 1024 --vocab 32000
  --cluster "$a100")
if "$loom" simulate "${llama[@]}" --gpus 2 --tp 2 --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"fits":true' "$tmp/stdout"; then ok "llama_simulate"; else fail "llama_simulate"; fi
if "$loom" plan "${llama[@]}" --gpus 8 --global-batch 16 --time-budget 5s --json \
  >"$tmp/stdout" 2>"$tmp/stderr" && grep -q '"configuration"' "$tmp/stdout"; then
  ok "llama_plan"
else fail "llama_plan"; fi
if "$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --model llama --kv-heads 2 \
  --cluster "$a100" --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"fits":true' "$tmp/stdout"; then ok "llama_from_config"; else fail "llama_from_config"; fi
# plan --from-config: the file's model and global batch; the command runs on the file.
if "$loom" plan --from-config "$src/configs/gpt-fortunes.toml" --model llama --kv-heads 2 \
  --cluster "$a100" --gpus 2 --time-budget 5s --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"command":"loom train --config [^ ]*gpt-fortunes.toml --model.kind llama --kv-heads 2 ' \
    "$tmp/stdout" && grep -q -- '--global-batch 32 ' "$tmp/stdout"; then
  ok "plan_from_config"
else fail "plan_from_config"; fi
expect_exit2 kv_heads_for_gpt "describes a llama" -- simulate "${gpt[@]}" --gpus 1 --kv-heads 4
expect_exit2 kv_heads_over_tp "must divide kv-heads (4)" -- simulate "${llama[@]}" --gpus 8 --tp 8
# A tied head across stages: rank 0 sends the weight (V·h fp32 = 131,072,000 bytes) and rank 1
# its gradient back; rank 1 holds the copy and its gradient, and no optimizer state for them
# (AdamW's two fp32 moments, 262,144,000 bytes, less than an untied head's).
if "$loom" simulate "${llama[@]}" --gpus 2 --pp 2 --tie-embeddings --json >"$tmp/tied" &&
  "$loom" simulate "${llama[@]}" --gpus 2 --pp 2 --json >"$tmp/untied" &&
  python3 - "$tmp/tied" "$tmp/untied" <<'PY'; then ok "tied_across_stages"; else fail "tied_across_stages"; fi
import json, sys
tied, untied = ([r for r in json.load(open(f))["ranks"]] for f in sys.argv[1:3])
def more(rank, key):  # tied minus untied
    return tied[rank][key] - untied[rank][key]
want = {(0, "p2p_bytes"): 131072000, (1, "p2p_bytes"): 131072000,
        (1, "optimizer_bytes"): -262144000, (1, "params_bytes"): 0, (0, "params_bytes"): 0}
bad = [(k, more(*k)) for k, v in want.items() if abs(more(*k) - v) > 1e-4 * 131072000]
print(bad or "ok")
sys.exit(1 if bad else 0)
PY
expect_exit2 model_kind "--model must be gpt or llama" -- simulate "${gpt[@]}" --gpus 1 \
  --model mlp

# plan's own lists (--schedules, --dp-modes, --recompute, --attention, --memory-limit) bound
# the search; the table is printed for people, and its best command trains as it is (gloo,
# one step: the plan and the runtime agree on what a layout is).
plan_lists=(plan --from-config "$src/configs/llama-fortunes.toml" --cluster "$here"
  --gpus 4 --schedules 1f1b,bfs --dp-modes allreduce,zero1 --recompute none,full
  --attention standard,flash --memory-limit 20GB --top 1000)
if "$loom" "${plan_lists[@]}" --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  [[ $(grep -c . "$tmp/stdout") -gt 10 ]] &&
  ! grep -v '"schedule":"\(1f1b\|bfs\)".*"dp_mode":"\(allreduce\|zero1\|none\)".*"recompute":"\(none\|full\)","attention":"\(standard\|flash\)"' \
    "$tmp/stdout" | grep -q .; then
  ok "plan_lists: $(grep -c . "$tmp/stdout") configurations, each within the lists"
else fail "plan_lists"; fi
if "$loom" "${plan_lists[@]}" --top 3 >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '^loom plan: Llama l=4 h=128 a=4 kv=2 f=384 s=64 V=256 on 4 devices of this-machine, global batch 32, memory limit 20.0 GB$' "$tmp/stdout" &&
  [[ $(grep -c '^[123] ' "$tmp/stdout") -eq 3 ]] && grep -q ' wins with ' "$tmp/stdout"; then
  ok "plan_table"
else fail "plan_table"; fi
best=$(grep -A1 '^the best as a loom train command' "$tmp/stdout" | tail -1)
read -r -a best_args <<<"${best#  loom }"
if [[ ${best_args[0]:-} == train ]] &&
  "$loom" "${best_args[@]}" --comm gloo --steps 1 --eval-batches 1 --progress false \
    --output.dir "$tmp/best" >"$tmp/stdout" 2>"$tmp/stderr" && grep -q '"step": 1,' "$tmp/best/metrics.jsonl"; then
  ok "plan_best_trains: $best"
else fail "plan_best_trains: $best"; fi

# simulate's pictures, the oversubscription factor, the distributed optimizer.
step_of() { python3 -c 'import json, sys; print(json.load(sys.stdin)["step_s"])'; }
fortunes=(simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$here")
if "$loom" "${fortunes[@]}" --pp 2 --svg "$tmp/s.svg" --trace "$tmp/s.json" >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '</svg>' "$tmp/s.svg" && python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["traceEvents"]' "$tmp/s.json" &&
  grep -q "^wrote $tmp/s.svg" "$tmp/stderr"; then
  ok "simulate_pictures"
else fail "simulate_pictures"; fi
# 4 ranks on this machine's 2 cores: twice the slowdown beyond the fair share, a slower step.
one=$("$loom" "${fortunes[@]}" --gpus 4 --oversubscribed 1 --json 2>"$tmp/stderr" | step_of)
two=$("$loom" "${fortunes[@]}" --gpus 4 --oversubscribed 2 --json 2>"$tmp/stderr" | step_of)
if python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(not (b > 1.5 * a > 0))' "$one" "$two"; then
  ok "oversubscribed: $one s -> $two s"
else fail "oversubscribed: $one s -> $two s"; fi
# The breakdown says so, and only when the ranks outnumber the cores.
cores=$(getconf _NPROCESSORS_ONLN)
"$loom" "${fortunes[@]}" --gpus $((2 * cores)) --oversubscribed 1.5 >"$tmp/over" 2>&1
"$loom" "${fortunes[@]}" --gpus "$cores" --oversubscribed 1.5 >"$tmp/fair" 2>&1
if grep -q "x1.50 beyond a fair share of the cores" "$tmp/over" && ! grep -q "beyond a fair share" "$tmp/fair"; then
  ok "oversubscribed_breakdown"
else fail "oversubscribed_breakdown: $(grep 'compute costs' "$tmp/over" "$tmp/fair")"; fi
# The runtime's own CPU (a profile's [node] runtime_cpu) multiplies the factor, and says so.
sed 's/^\[node\]$/[node]\nruntime_cpu = 1.2/' "$here" >"$tmp/runtime.toml"
"$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$tmp/runtime.toml" \
  --gpus $((2 * cores)) --oversubscribed 1.5 >"$tmp/runtime" 2>&1
if grep -q "x1.80 beyond a fair share of the cores (x1.20 of it the runtime's own CPU)" "$tmp/runtime"; then
  ok "runtime_cpu_breakdown"
else fail "runtime_cpu_breakdown: $(grep 'compute costs' "$tmp/runtime")"; fi
expect_exit2 oversubscribed_range "from 1 to 100" -- "${fortunes[@]}" --gpus 4 --oversubscribed 0.5
if "$loom" simulate "${gpt[@]}" --gpus 16 --tp 8 --distributed-optimizer --json >"$tmp/stdout" 2>"$tmp/stderr" &&
  grep -q '"configuration":"dp=2 pp=1 tp=8 1f1b m=1 b=1 distopt"' "$tmp/stdout"; then
  ok "distributed_optimizer"
else fail "distributed_optimizer"; fi
expect_exit2 distopt_with_zero3 "drop --dp-mode" -- simulate "${gpt[@]}" --gpus 16 --tp 8 \
  --distributed-optimizer --dp-mode zero3

# A shared cluster profiled on another processor: one warning line naming both.
sed 's/^shared = true$/shared = true\ncpu = "Imaginary CPU 1"/' "$here" >"$tmp/other.toml"
if grep -q "model name" /proc/cpuinfo; then
  "$loom" simulate --from-config "$src/configs/gpt-fortunes.toml" --cluster "$tmp/other.toml" \
    --json >"$tmp/stdout" 2>"$tmp/stderr"
  if [[ $(grep -c . "$tmp/stderr") -eq 1 ]] && grep -q "Imaginary CPU 1" "$tmp/stderr"; then
    ok "other_cpu_warning: $(cat "$tmp/stderr")"
  else fail "other_cpu_warning"; fi
fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
