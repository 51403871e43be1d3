#!/usr/bin/env bash
# Open MPI across the test bed: mpirun on host 0 reaches host 1 through hosts.sh's rsh agent
# (ip netns exec, in place of ssh), TCP between the hosts and shared memory inside each. A
# 2 hosts x 2 ranks breadth-first run (pp 2 x loops 2 x dp 2) ends within 1e-4 of the
# single-process run, the placement line names the hosts, and nothing is left running.
# usage: mpi_test.sh LOOM_BINARY HOSTS_SH
set -u
if ! command -v mpirun >/dev/null; then
  echo "SKIP: no mpirun (Open MPI)"
  exit 77
fi
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
export LOOM_COMM_TIMEOUT_S=60
h0="$LOOM_HOSTS_PREFIX-h0"
h1="$LOOM_HOSTS_PREFIX-h1"

run() { "$@" >"$tmp/stdout" 2>"$tmp/stderr"; }
run "$loom" train --config "$cfg" --model.layers 4 --output.dir "$tmp/one" || fail "one process"
run "$loom" checkpoint convert "$tmp/one/checkpoint" --out "$tmp/one.c" || fail "convert one"

run on 0 mpirun --host "$h0:2,$h1:2" -n 4 --mca plm_rsh_agent "$hosts_sh rsh" \
  --mca btl tcp,vader,self --mca btl_tcp_if_include 10.77.0.0/24 \
  --mca oob_tcp_if_include 10.77.0.0/24 -x LOOM_COMM_TIMEOUT_S \
  "$loom" train --config "$cfg" --comm mpi --model.layers 4 --pp 2 --dp 2 --schedule bfs \
  --loops 2 --output.dir "$tmp/mpi"
rc=$?
if [[ $rc -eq 0 ]] && grep -q "placement on 2 hosts: $h0 ranks 0-1 (pp stage 0), $h1 ranks 2-3 (pp stage 1); every dp group inside one host" "$tmp/stderr" &&
  grep -q "schedule bfs.*comm mpi" "$tmp/stderr"; then
  ok "mpirun across 2 hosts: bfs ran, the placement line names the hosts"
else
  fail "mpirun across hosts: rc=$rc"
fi
expect_one_process "mpi bfs" "$tmp/mpi"
if no_processes; then ok "no process left on the hosts"; else fail "processes left on the hosts"; fi

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
