#!/usr/bin/env bash
# Automatic restart across hosts (loom launch --max-restarts), on 2 hosts x 2 ranks training
# pp 2 x dp 2 for 8 steps with a checkpoint every 2 (LOOM_COMM_TIMEOUT_S=16). Rank 2 (host 1)
# stops communicating at step 5 of the first attempt (LOOM_FAULT_KIND=hang), so the fault
# below strikes a run in progress, after the checkpoint of step 4:
#  - host 1's link cut, then back 14 s later: both hosts stop their ranks, node 0 opens
#    attempt 1, host 1's launcher reconnects by itself, and the job ends well (exit 0 on both)
#    going on from step 4, at the parameters of the single-process run (within 1e-4);
#  - host 1 lost (every process in its namespace killed): node 0 waits; the same launch
#    command run again on host 1 joins attempt 1, and the job ends well, as above;
#  - the same with host 1's run folder its own and emptied (a host replaced with a new disk):
#    its ranks go on from step 4 too, with the manifest and files fetched from host 0;
#  - host 1 lost for good (--join-timeout 4): node 0 ends the job naming node 1, exit 1;
#  - nodes started with different --max-restarts: one line, exit 2.
# usage: restart_test.sh LOOM_BINARY HOSTS_SH
set -u
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
export LOOM_COMM_TIMEOUT_S=16
h1="$LOOM_HOSTS_PREFIX-h1"
steps=(--model.layers 4 --pp 2 --dp 2 --steps 8 --output.checkpoint_every 2)

run() { "$@" >"$tmp/stdout" 2>"$tmp/stderr"; }
run "$loom" train --config "$cfg" --model.layers 4 --steps 8 --output.dir "$tmp/one" ||
  fail "one process"
run "$loom" checkpoint convert "$tmp/one/checkpoint" --out "$tmp/one.c" || fail "convert one"

# node NAME K PORT JOIN: node K's launcher of run NAME, in the background (pid in $pid); its
# output is appended to $tmp/NAME.K. The fault strikes the first attempt only. With
# private=1, host K's run folder is its own: $tmp/NAME.hK mounted at $tmp/NAME.
node() {
  local name=$1 k=$2 port=$3 join=$4 mount=()
  [[ -n ${private:-} ]] && mount=(unshare -m --propagation private sh -c \
    'mount --bind "$1" "$2" && shift 2 && exec "$@"' _ "$tmp/$name.h$k" "$tmp/$name")
  LOOM_FAULT_RANK=2 LOOM_FAULT_STEP=5 LOOM_FAULT_KIND=hang on "$k" "${mount[@]}" "$loom" launch --nproc 2 \
    --nnodes 2 --node-rank "$k" --master-addr "$master" --master-port "$port" \
    --max-restarts 1 --join-timeout "$join" -- "$loom" train --config "$cfg" \
    --output.dir "$tmp/$name" "${steps[@]}" >>"$tmp/$name.$k" 2>&1 &
  pid=$!
}

# started NAME [DIR]: waits (up to 60 s) for the checkpoint of step 4, the one before the
# fault, in DIR (default: run NAME's folder).
started() {
  local i
  for ((i = 0; i < 120; i++)); do
    [[ -f ${2:-$tmp/$1}/checkpoint/step-000004/manifest.json ]] && sleep 1 && return 0
    sleep 0.5
  done
  return 1
}

# wait_line FILE PATTERN SECONDS: until FILE has a line matching PATTERN.
wait_line() {
  local i
  for ((i = 0; i < $3 * 2; i++)); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}

# resumed NAME RC0 RC1 [DIR]: both launchers ended well, attempt 1 went on from step 4, the
# result (in DIR, default run NAME's folder) is the single-process run's.
resumed() {
  local name=$1
  cp "$tmp/$name.0" "$tmp/stderr"
  if [[ $2 -eq 0 && $3 -eq 0 ]] &&
    grep -q "attempt 0 failed (.*); restart 1 of 1" "$tmp/$name.0" &&
    grep -q "restart 1: going on from step-000004" "$tmp/$name.0" &&
    grep -q "node 1 joins attempt 1" "$tmp/$name.1"; then
    ok "$name: both hosts exit 0; node 0 says: $(grep -m1 "attempt 0 failed" "$tmp/$name.0")"
  else
    fail "$name: codes $2 $3; node 0: $(tail -4 "$tmp/$name.0"); node 1: $(tail -3 "$tmp/$name.1")"
  fi
  expect_one_process "$name" "${4:-$tmp/$name}"
}

bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
node cut 0 29750 60
p0=$pid
node cut 1 29750 60
p1=$pid
started cut || fail "link cut: the run did not start"
bash "$hosts_sh" link 1 down
sleep 14
bash "$hosts_sh" link 1 up
wait "$p0"
rc0=$?
wait "$p1"
resumed cut "$rc0" $?
if grep -q "node 1 ($h1, ranks 2-3) unreachable: no heartbeat" "$tmp/cut.0"; then
  ok "link cut: node 0 named host 1: $(grep -m1 "node 1 ($h1" "$tmp/cut.0")"
else
  fail "link cut: node 0 does not name host 1"
fi

# lose_host1 NAME PORT JOIN [DIR]: a new bed, run NAME on both hosts, then every process of
# host 1 killed after the checkpoint of step 4 (in DIR); node 0's launcher pid in $p0.
lose_host1() {
  bash "$hosts_sh" up 2 >/dev/null || fail "up 2 again"
  node "$1" 0 "$2" "$3"
  p0=$pid
  node "$1" 1 "$2" "$3"
  started "$1" "${4:-}" || fail "$1: the run did not start"
  # shellcheck disable=SC2046 # one pid a word
  kill -KILL $(ip netns pids "$h1")
}

lose_host1 lost 29751 60
if wait_line "$tmp/lost.0" "restart 1 of 1: waiting up to 60 s for every node" 40; then
  node lost 1 29751 60
  wait "$pid"
  rc1=$?
else
  rc1=1
fi
wait "$p0"
resumed lost $? "$rc1"

# Hosts whose run folders are their own, host 1 lost with its disk (its folder emptied) and
# started again: its ranks find no checkpoint of the job, go on from step 4 with node 0's, and
# fetch the manifest and their files from host 0's copies; the result is the one process's.
mkdir -p "$tmp/replaced" "$tmp/replaced.h0" "$tmp/replaced.h1"
private=1 lose_host1 replaced 29754 60 "$tmp/replaced.h0"
rm -rf "$tmp/replaced.h1/"*
if wait_line "$tmp/replaced.0" "restart 1 of 1: waiting up to 60 s for every node" 40; then
  private=1 node replaced 1 29754 60
  wait "$pid"
  rc1=$?
else
  rc1=1
fi
wait "$p0"
resumed replaced $? "$rc1" "$tmp/replaced.h0"
if grep -q "copied from rank 0 on .*-h0 to ranks 2-3 on $h1" "$tmp/replaced.0" &&
   grep -q "fetched 2 checkpoint files .* for ranks 2-3 on $h1" "$tmp/replaced.0"; then
  ok "replaced host: $(grep -o 'fetched .*' "$tmp/replaced.0")"
else
  fail "replaced host: no fetch said: $(tail -5 "$tmp/replaced.0")"
fi

lose_host1 gone 29752 4
wait "$p0"
rc0=$?
cp "$tmp/gone.0" "$tmp/stderr"
if [[ $rc0 -eq 1 ]] && grep -q "node 1 did not come back within 4 s (--join-timeout); the job ends, 1 attempt made" "$tmp/gone.0"; then
  ok "host lost for good: node 0 says: $(grep -m1 "did not come back" "$tmp/gone.0")"
else
  fail "host lost for good: code $rc0; node 0: $(tail -3 "$tmp/gone.0")"
fi

bash "$hosts_sh" up 2 >/dev/null || fail "up 2 again"
node mismatch 0 29753 60
p0=$pid
on 1 "$loom" launch --nproc 2 --nnodes 2 --node-rank 1 --master-addr "$master" \
  --master-port 29753 -- true >"$tmp/stdout" 2>"$tmp/stderr"
rc=$?
# shellcheck disable=SC2046 # one pid a word
kill -KILL $(ip netns pids "$LOOM_HOSTS_PREFIX-h0")
wait "$p0"
if [[ $rc -eq 2 && $(grep -c . "$tmp/stderr") -eq 1 ]] &&
  grep -q "node 0 runs with --max-restarts 1, this node with 0; give every node the same" "$tmp/stderr"; then
  ok "different --max-restarts: $(cat "$tmp/stderr")"
else
  fail "different --max-restarts: rc $rc: $(cat "$tmp/stderr")"
fi
if no_processes; then ok "no process left on the hosts"; else fail "processes left on the hosts"; fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
