# shellcheck shell=bash
# Sourced by the hosts tests: usage `source hosts_lib.sh LOOM_BINARY HOSTS_SH`. Skips the test
# (exit 77) where network namespaces cannot be made; otherwise makes $tmp and a bed prefix of
# this test's own (so a bed someone made by hand is never touched), and on any exit removes
# the bed and $tmp (KEEP_TMP=1 keeps $tmp, the runs' outputs, and prints where it is).
# ok/fail/passes/fails come from tests/cli/check_lib.sh.
loom=$1
hosts_sh=$2
export LOOM_HOSTS_PREFIX="loomt$$"
if ! why=$(bash "$hosts_sh" check); then
  echo "SKIP: $why"
  exit 77
fi
tmp=$(mktemp -d)
[[ -n ${KEEP_TMP:-} ]] && echo "tmp: $tmp"
cleanup() {
  bash "$hosts_sh" down
  rm -rf "$tmp"
}
trap cleanup EXIT
[[ -n ${KEEP_TMP:-} ]] && trap 'bash "$hosts_sh" down' EXIT
# shellcheck source=tests/cli/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli/check_lib.sh"
export python="${LOOM_VENV:-$HOME/.local/share/loom/venv}/bin/python"
master=10.77.0.10

# The tiny GPT of the CLI tests, 4 layers (pp 2 x loops 2), a checkpoint at the last step.
cfg="$tmp/tiny.toml"
cat "$(dirname "${BASH_SOURCE[0]}")/../cli/tiny_gpt.toml" - >"$cfg" <<'TOML'
synthetic_size = 256
[train]
steps = 4
global_batch = 8
microbatches = 2
eval_batches = 1
optimizer = "adamw"
[output]
progress = false
checkpoint_every = 4
TOML

# on K CMD ...: CMD on host K.
on() {
  local k=$1
  shift
  bash "$hosts_sh" exec "$k" "$@"
}

# run_hosts NPROC NAME PORT TRAIN_ARGS ...: `loom train` on 2 hosts x NPROC ranks, node K's
# output in $tmp/NAME.K; starts both launchers in the background (pids in $launchers) and
# returns. run2x2 NAME PORT TRAIN_ARGS ...: 2 ranks a host.
run_hosts() {
  local nproc=$1 name=$2 port=$3 k
  shift 3
  launchers=()
  for k in 0 1; do
    on "$k" "$loom" launch --nproc "$nproc" --nnodes 2 --node-rank "$k" --master-addr "$master" \
      --master-port "$port" -- "$loom" train --config "$cfg" --output.dir "$tmp/$name" "$@" \
      >"$tmp/$name.$k" 2>&1 &
    launchers+=($!)
  done
}
run2x2() { run_hosts 2 "$@"; }

# wait_all: waits for $launchers; rcs in $rcs.
wait_all() {
  local p
  rcs=()
  for p in "${launchers[@]}"; do
    wait "$p"
    rcs+=($?)
  done
}

# no_processes: no process is left in any host of the bed.
no_processes() {
  local ns left try
  # A process killed a moment ago (SIGKILL) may still be exiting: up to 5 s for it to go.
  for ((try = 0; try < 50; ++try)); do
    left=""
    for ns in $(ip netns list | awk '{print $1}' | grep "^$LOOM_HOSTS_PREFIX-" || true); do
      left+=" $(ip netns pids "$ns" | tr '\n' ' ')"
    done
    [[ -z ${left// /} ]] && return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086 # one pid a word
  echo "left on the hosts: $(ps -o pid=,args= -p "$(echo $left | tr ' ' ',')" 2>/dev/null)" >&2
  return 1
}

# expect_one_process NAME RUN_DIR: the run's checkpoint against the single-process run's
# ($tmp/one.c, made by the test) within 1e-4.
expect_one_process() {
  local name=$1 dir=$2
  run "$loom" checkpoint convert "$dir/checkpoint" --out "$dir.c" || fail "convert $name"
  if "$python" -W ignore "$(dirname "${BASH_SOURCE[0]}")/../cli/close_params.py" "$dir.c" \
    "$tmp/one.c" 1e-4 >"$tmp/stdout" 2>&1; then
    ok "$name on 2 hosts x 2 ranks = one process: $(cat "$tmp/stdout")"
  else
    fail "$name vs one process: $(cat "$tmp/stdout")"
  fi
}
