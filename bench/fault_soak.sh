#!/usr/bin/env bash
# Soak of the rank-failure paths: every fault kind on every launcher, repeated, to catch the
# outcomes that only some runs show (a surviving rank that crashes while the job is torn down,
# a hang, a stray process). Each run must end non-zero within its time limit, name the failure
# in one line (at most one "loom: error" line), print no crash report or backtrace, and leave
# no rank behind.
#   bash bench/fault_soak.sh build [rounds]      (default 5 rounds; ~4 s a run on 2 cores)
# Results: docs/reliability.md ("Faults tried", the soak row).
set -u
build=${1:-build}
rounds=${2:-5}
loom=$(realpath "$build/bin/loom")
cfg=$(realpath "$(dirname "$0")/../configs/gpt-fortunes.toml")
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
tmp=$(mktemp -d)
keep=$(mktemp -d /tmp/fault_soak.XXXXXX)  # the stderr of every bad run
trap 'rm -rf "$tmp"' EXIT

# What no failure may print: a crash report, a C++ backtrace, a library's banner.
crash='Process received signal|corrupted|double free|Segmentation fault|terminate called|frame #|Exception raised from|MPI_ABORT was invoked|ORTE_ERROR_LOG'

# kind, the line that must name it (a grep -E pattern)
scenarios=(
  "kill|rank [0-9]+ (\\(pid [0-9]+\\) )?was killed by signal 9"
  "torch-error|^\\[rank [0-9]+\\] loom: error: LOOM_FAULT_KIND=torch-error on rank [0-9]+ at step"
  "out-of-memory|^\\[rank [0-9]+\\] loom: error: out of memory: an allocation failed"
  "hang|communication timeout"
  "nan|the loss is .* and the gradient norm"
)
layouts=("2|--dp 2" "2|--pp 2 --dp 1" "4|--dp 2 --pp 2")  # ranks|flags

total=0 bad=0
declare -A bad_of
for round in $(seq 1 "$rounds"); do
  for comm in mpi gloo; do
    for l in "${layouts[@]}"; do
      nproc=${l%%|*} layout=${l#*|}
      for s in "${scenarios[@]}"; do
        kind=${s%%|*} want=${s#*|}
        step=$(((round % 2) + 1))  # the fault at step 1 or 2
        out="$tmp/r"
        rm -rf "$out"
        start=$(date +%s.%N)
        # shellcheck disable=SC2086  # the layout is several flags
        # The last rank: on the last pipeline stage (where a NaN loss scale takes effect).
        LOOM_COMM_TIMEOUT_S=4 LOOM_FAULT_KIND=$kind LOOM_FAULT_RANK=$((nproc - 1)) LOOM_FAULT_STEP=$step \
          timeout 90 "$loom" train --config "$cfg" --nproc "$nproc" --comm "$comm" $layout --steps 4 \
          --checkpoint-every 0 --output.dir "$out" >"$tmp/stdout" 2>"$tmp/stderr"
        rc=$?
        secs=$(echo "$(date +%s.%N) - $start" | bc)
        sleep 0.5  # the ranks' exit, after the launcher's
        left=$(pgrep -f "$out" | wc -l)
        why=""
        [[ $rc -eq 0 ]] && why="exit 0"
        [[ $rc -eq 124 ]] && why="timed out (90 s)"
        grep -qE "$crash" "$tmp/stderr" && why="$why; crash report: $(grep -m1 -E "$crash" "$tmp/stderr")"
        grep -qE "$want" "$tmp/stderr" || why="$why; no line matching '$want'"
        # One error line: the failing rank's, or, for a failure all ranks reach together, one
        # rank's for all. (A hang: each waiting rank names where it waits, by design.) The
        # others, whose communication then fails, stop without a line of their own.
        errors=$(grep -c "loom: error" "$tmp/stderr")
        [[ $kind != hang && $errors -gt 1 ]] && why="$why; $errors error lines"
        [[ $left -gt 0 ]] && why="$why; $left processes left" && pkill -9 -f "$out"
        total=$((total + 1))
        name="$comm ${layout// /} $kind"
        if [[ -n $why ]]; then
          bad=$((bad + 1))
          bad_of[$name]=$((${bad_of[$name]:-0} + 1))
          echo "BAD  round $round $name step $step (rc $rc, ${secs%.*} s):$why"
          cp "$tmp/stderr" "$keep/$total.stderr"
        else
          printf 'ok   round %d %-28s step %d rc %3d %5.1f s\n' "$round" "$name" "$step" "$rc" "$secs"
        fi
      done
    done
  done
done
echo "fault soak: $bad bad of $total runs ($rounds rounds x 2 launchers x ${#layouts[@]} layouts x ${#scenarios[@]} faults)"
for k in "${!bad_of[@]}"; do echo "  $k: ${bad_of[$k]} bad"; done
[[ $bad -gt 0 ]] && echo "their stderr: $keep" || rmdir "$keep"
[[ $bad -eq 0 ]]
