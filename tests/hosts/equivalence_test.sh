#!/usr/bin/env bash
# 2 hosts x 2 ranks over the test bed's network = one process on the same global batch: with
# pp 2 x dp 2 the dp groups sit inside a host and the pipeline's activations cross the link.
# Breadth-first (pp 2 x loops 2) and ZeRO-3 each end within 1e-4 (relative, per tensor) of the
# single-process run's parameters, as the CLI's other layout-equivalence checks do; so does
# ZeRO-3 with --placement pipeline-inside (each host a whole pipeline, the dp groups across the
# link). Bytes loom counts on the link = bytes the kernel counts, within 5 % (ZeRO-2, ZeRO-3).
# usage: equivalence_test.sh LOOM_BINARY HOSTS_SH
set -u
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
export LOOM_COMM_TIMEOUT_S=60

run() { "$@" >"$tmp/stdout" 2>"$tmp/stderr"; }
run "$loom" train --config "$cfg" --model.layers 4 --output.dir "$tmp/one" || fail "one process"
run "$loom" checkpoint convert "$tmp/one/checkpoint" --out "$tmp/one.c" || fail "convert one"

port=29600
dp_inside="placement on 2 hosts: $LOOM_HOSTS_PREFIX-h0 ranks 0-1 (pp stage 0), $LOOM_HOSTS_PREFIX-h1 ranks 2-3 (pp stage 1); every dp group inside one host"
pipeline_inside="placement on 2 hosts: $LOOM_HOSTS_PREFIX-h0 ranks 0-1 (pp stages 0-1), $LOOM_HOSTS_PREFIX-h1 ranks 2-3 (pp stages 0-1); 2 of 2 dp groups across hosts"
# check NAME WANT PLACEMENT_LINE TRAIN_ARGS...
check() {
  local name=$1 want=$2 line=$3
  shift 3
  port=$((port + 1))
  run2x2 "$name" "$port" --model.layers 4 --pp 2 --dp 2 "$@"
  wait_all
  cp "$tmp/$name.0" "$tmp/stderr"
  if [[ ${rcs[0]} -ne 0 || ${rcs[1]} -ne 0 ]]; then
    fail "$name: launchers exited ${rcs[*]}; node 1: $(tail -3 "$tmp/$name.1")"
    return
  fi
  if grep -qF "$line" "$tmp/$name.0" && grep -q "on dp=2 x pp=2 .*$want" "$tmp/$name.0"; then
    ok "$name: ran $want; $(grep -m1 -o "placement on.*" "$tmp/$name.0")"
  else
    fail "$name: no placement line"
  fi
  expect_one_process "$name" "$tmp/$name"
}
check bfs "schedule bfs" "$dp_inside" --schedule bfs --loops 2
check zero3 "dp-mode zero3" "$dp_inside" --dp-mode zero3
check pipeline-inside "dp-mode zero3" "$pipeline_inside" --dp-mode zero3 --placement pipeline-inside
# Bytes: one rank a host, dp 2 across the link; loom's count of what each rank sent (the
# summary's sent_bytes, evaluation included) within 5% of what the kernel counted leaving the two
# hosts' eth0 (headers, the store and the launchers' heartbeats are the difference). ZeRO-2's
# reduce-scatter is the case Gloo's own collective would fail: it sends an all-reduce's bytes.
tx() { on "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }
wire() {
  local name=$1 mode=$2 before after msg
  port=$((port + 1))
  before=$(($(tx 0) + $(tx 1)))
  run_hosts 1 "$name" "$port" --model.layers 4 --dp 2 --dp-mode "$mode" --steps 16 \
    --output.checkpoint_every 0
  wait_all
  after=$(($(tx 0) + $(tx 1)))
  if [[ ${rcs[0]} -ne 0 || ${rcs[1]} -ne 0 ]]; then
    fail "$name: launchers exited ${rcs[*]}; $(tail -2 "$tmp/$name.0")"
    return
  fi
  if msg=$("$python" "$(dirname "$0")/wire_bytes.py" "$tmp/$name/metrics.jsonl" \
    "$((after - before))" 0.05); then
    ok "$name: $msg"
  else
    fail "$name: $msg"
  fi
}
wire zero2-bytes zero2
wire zero3-bytes zero3
if no_processes; then ok "no process left on the hosts"; else fail "processes left on the hosts"; fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
