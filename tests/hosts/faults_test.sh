#!/usr/bin/env bash
# Faults of a network, on 2 hosts x 2 ranks training with pp 2 x dp 2 (LOOM_COMM_TIMEOUT_S=16,
# so a silent node is named after 8 s):
#  - host 1's link cut mid-run (its bridge port down): every rank on both hosts has exited
#    within the timeout + 10 s; host 0 names host 1 and its ranks as unreachable, host 1 names
#    host 0 (whose store it can no longer reach) and its ranks;
#  - host 1 lost (every process in its namespace killed): host 0's ranks and launcher exit
#    within the timeout + 10 s, naming host 1 and its ranks;
#  - rank 3 (on host 1) killed at step 3: both hosts stop at once, each naming rank 3 and its
#    host (host 0's ranks fail on the broken connection, and host 0 names rank 3 as the cause); the usage errors of the multi-node flags are one line each, exit 2.
# usage: faults_test.sh LOOM_BINARY HOSTS_SH
set -u
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
export LOOM_COMM_TIMEOUT_S=16
limit=$((LOOM_COMM_TIMEOUT_S + 10))
h0="$LOOM_HOSTS_PREFIX-h0"
h1="$LOOM_HOSTS_PREFIX-h1"

# start NAME PORT: a long run on both hosts; returns once both report their first step's loss.
start() {
  run2x2 "$1" "$2" --pp 2 --dp 2 --steps 100000 --output.progress true --eval_every 0 \
    --output.checkpoint_every 0
  local i
  for ((i = 0; i < 120; i++)); do
    grep -q "placement on 2 hosts" "$tmp/$1.0" 2>/dev/null && sleep 2 && return 0
    sleep 0.5
  done
  return 1
}

bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
start cut 29700 || fail "link cut: the run did not start"
bash "$hosts_sh" link 1 down
t0=$(date +%s)
wait_all
took=$(($(date +%s) - t0))
cp "$tmp/cut.1" "$tmp/stderr"
if [[ $took -le $limit && ${rcs[0]} -ne 0 && ${rcs[1]} -ne 0 ]] && no_processes; then
  ok "link cut: every rank on both hosts exited in $took s (limit $limit), codes ${rcs[*]}"
else
  fail "link cut: $took s (limit $limit), codes ${rcs[*]}"
fi
if grep -q "node 1 ($h1, ranks 2-3) unreachable: no heartbeat for [0-9]* s; stopping ranks 0-1 on $h0" "$tmp/cut.0"; then
  ok "host 0 says: $(grep -m1 "node 1 (" "$tmp/cut.0")"
else
  fail "host 0 does not name host 1: $(tail -3 "$tmp/cut.0")"
fi
if grep -q "node 0 ($h0, ranks 0-1) unreachable: its store at 10.77.0.10:29700 .*; stopping ranks 2-3 on $h1" "$tmp/cut.1"; then
  ok "host 1 says: $(grep -m1 "node 0 (" "$tmp/cut.1")"
else
  fail "host 1 does not name host 0: $(tail -3 "$tmp/cut.1")"
fi

bash "$hosts_sh" up 2 >/dev/null || fail "up 2 again"
start lost 29701 || fail "host lost: the run did not start"
# shellcheck disable=SC2046 # one pid a word
kill -KILL $(ip netns pids "$h1")
t0=$(date +%s)
wait_all
took=$(($(date +%s) - t0))
cp "$tmp/lost.0" "$tmp/stderr"
if [[ $took -le $limit && ${rcs[0]} -ne 0 ]] && no_processes; then
  ok "host 1 lost: host 0's ranks and launcher exited in $took s (limit $limit), code ${rcs[0]}"
else
  fail "host lost: $took s (limit $limit), code ${rcs[0]}"
fi
if grep -q "node 1 ($h1, ranks 2-3) unreachable: no heartbeat for [0-9]* s" "$tmp/lost.0" &&
  grep -q "rank [01] on $h0 (pid [0-9]*) exited with code 1" "$tmp/lost.0"; then
  ok "host 0 says: $(grep -m1 "node 1 (" "$tmp/lost.0")"
else
  fail "host 0 does not name host 1: $(tail -3 "$tmp/lost.0")"
fi

bash "$hosts_sh" up 2 >/dev/null || fail "up 2 again"
LOOM_FAULT_RANK=3 LOOM_FAULT_STEP=3 LOOM_FAULT_KIND=kill run2x2 rank 29702 --pp 2 --dp 2 --steps 50
t0=$(date +%s)
wait_all
took=$(($(date +%s) - t0))
cp "$tmp/rank.0" "$tmp/stderr"
if [[ $took -le $limit && ${rcs[0]} -ne 0 && ${rcs[1]} -eq 137 ]] && no_processes &&
  grep -q "rank 3 on $h1 (pid [0-9]*) was killed by signal 9" "$tmp/rank.1" &&
  grep -q "rank 3 on $h1 was killed by signal 9" "$tmp/rank.0"; then
  ok "rank 3 killed: both hosts stopped in $took s; host 0 says: $(grep -m1 "^loom: rank" "$tmp/rank.0")"
else
  fail "rank killed on host 1: $took s, codes ${rcs[*]}; host 1: $(tail -2 "$tmp/rank.1")"
fi

one_line() {
  local want=$1
  shift
  "$loom" launch "$@" -- true >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$? lines
  lines=$(grep -c . "$tmp/stderr")
  if [[ $rc -eq 2 && $lines -eq 1 ]] && grep -qF -- "$want" "$tmp/stderr"; then
    ok "launch $*: $(cat "$tmp/stderr")"
  else
    fail "launch $*: rc=$rc, $lines lines, expected 2 and one line with '$want'"
  fi
}
one_line "needs --node-rank K and --master-addr A" --nproc 2 --nnodes 2
one_line "need --nnodes H > 1" --nproc 2 --node-rank 1
one_line "--node-rank must be an integer in [0, 1]" --nproc 2 --nnodes 2 --node-rank 2 --master-addr "$master"
one_line "use mpirun --host" --nproc 2 --nnodes 2 --node-rank 0 --master-addr "$master" --comm mpi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
