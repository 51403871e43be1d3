#!/usr/bin/env bash
# loom doctor reports Open MPI's single-copy transfers between ranks of one machine (CMA), and
# warns, naming the cause, when they are turned off; so does loom train on several local ranks.
# usage: single_copy_test.sh LOOM_BINARY CONFIG_DIR
set -u
loom=$1 configs=$2
fails=0 passed=0
check() { # name command...
  local name=$1; shift
  if "$@"; then passed=$((passed + 1)); else echo "FAIL: $name"; fails=$((fails + 1)); fi
}
on=$(env -u OMPI_MCA_btl_vader_single_copy_mechanism "$loom" doctor 2>&1)
off=$(OMPI_MCA_btl_vader_single_copy_mechanism=none "$loom" doctor 2>&1)
check "the row says shared buffers when single copy is off" \
  grep -q '^  MPI shared memory   copies through shared buffers' <<<"$off"
check "the warning names the variable that turned it off" \
  grep -q '^warning: Open MPI cannot copy.*single_copy_mechanism=none turns it off' <<<"$off"
check "doctor reports problems then" grep -q '^doctor found problems' <<<"$off"
check "the default run reports the row once (either way: it depends on the machine)" \
  test "$(grep -c 'single copy (CMA)\|copies through shared buffers' <<<"$on")" = 1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
train=(train --config "$configs/gpt-fortunes.toml" --nproc 2 --pp 2 --steps 1 --eval_every 0
  --output.dir "$out/run" --output.progress false)
warned=$(OMPI_MCA_btl_vader_single_copy_mechanism=none "$loom" "${train[@]}" 2>&1)
check "train on 2 local ranks warns, naming the variable" \
  grep -q '^loom: warning: Open MPI cannot copy.*single_copy_mechanism=none' <<<"$warned"
check "and still trains" grep -q '"step": *1' "$out/run/metrics.jsonl"
[[ $fails -eq 0 ]] || { echo "--- with it off:"; echo "$off"; echo "--- default:"; echo "$on"; }
echo "$passed passed, $fails failed"
exit $fails
