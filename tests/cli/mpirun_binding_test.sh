#!/usr/bin/env bash
# loom train --nproc N under MPI binds each rank to an equal share of the CPUs the launcher may
# use (Open MPI alone binds one or two ranks to one core each), and none when the ranks outnumber
# them: read from each running rank's /proc/PID/status.
# usage: mpirun_binding_test.sh LOOM_BINARY
set -u
loom=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

cfg="$tmp/tiny.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$cfg" <<'TOML'
[train]
global_batch = 12
[output]
progress = false
TOML
cpus=$(python3 -c "import os; print(len(os.sched_getaffinity(0)))")  # (nproc obeys OMP_NUM_THREADS)

# allowed N: start N ranks (slow steps), print each rank's number of allowed CPUs, sorted.
allowed() {
  local n=$1 pid kids ranks="" r i
  "$loom" train --config "$cfg" --nproc "$n" --comm mpi --steps 400 --emulate.latency 5ms \
    --output.dir "$tmp/run$n" >"$tmp/out$n" 2>&1 &
  pid=$!
  for i in $(seq 300); do  # the ranks: children of mpirun, the launcher's child
    kids=$(pgrep -P "$pid")
    [[ -n $kids ]] && ranks=$(pgrep -P "$kids" | tr '\n' ' ')
    [[ $(wc -w <<<"$ranks") -eq $n ]] && grep -q '"step": 1,' "$tmp/run$n/metrics.jsonl" 2>/dev/null && break
    sleep 0.1
  done
  for r in $ranks; do
    python3 -c "import os, sys; print(len(os.sched_getaffinity(int(sys.argv[1]))))" "$r"
  done | sort -n | tr '\n' ' '
  kill -TERM "$pid"  # stops after the step, with a checkpoint
  wait "$pid" 2>/dev/null
}

# One rank, two (as many as this machine has on the 2-core CI machine) and more than the CPUs.
for n in $(printf '%s\n' 1 2 $((cpus + 1)) | sort -un); do
  if ((n <= cpus)); then share=$((cpus / n)); else share=$cpus; fi
  want=$(for ((i = 0; i < n; i++)); do echo "$share"; done | tr '\n' ' ')
  got=$(allowed "$n")
  if [[ $got == "$want" ]]; then
    ok "$n rank(s) on $cpus CPUs: each allowed $share"
  else
    fail "$n rank(s) on $cpus CPUs: allowed [$got], expected [$want]"
    cat "$tmp/out$n"
  fi
done

# shellcheck disable=SC2154 # passes and fails: check_lib.sh's
echo "mpirun_binding_test: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
