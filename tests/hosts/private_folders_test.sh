#!/usr/bin/env bash
# Hosts that do not share the run folder (node-local disks: each host's own directory mounted
# at the same path, in a mount namespace of its own), 2 hosts x 2 ranks, pp 2 x dp 2:
#  - the run trains and saves (each rank its own file, the manifests on rank 0's host only),
#    and rank 0 says once, at the start, that ranks 2-3 on host 1 do not see its folder;
#  - resuming there: one line, on one host, naming the ranks that cannot read the checkpoint,
#    their host and the fix (no launcher line beside it); exit 2 on both hosts;
#  - host 1 given host 0's manifests but not its rank files: the same layout resumes (each
#    rank reads its own file); another (dp 4) is refused in one line naming the file that is
#    not in rank 0's folder though another rank sees it;
#  - every file copied to both hosts (the fix the lines give): the dp 4 resume trains on.
# usage: private_folders_test.sh LOOM_BINARY HOSTS_SH
set -u
# shellcheck source=tests/hosts/hosts_lib.sh
source "$(dirname "$0")/hosts_lib.sh"
bash "$hosts_sh" up 2 >/dev/null || fail "up 2"
mkdir -p "$tmp/h0" "$tmp/h1" "$tmp/run"

# private NAME PORT TRAIN_ARGS...: loom train on both hosts, host K with $tmp/hK at $tmp/run;
# waits for both; exit codes in $rcs, node K's output in $tmp/NAME.K.
private() {
  local name=$1 port=$2 k p
  shift 2
  launchers=()
  for k in 0 1; do
    on "$k" unshare -m --propagation private sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' \
      _ "$tmp/h$k" "$tmp/run" "$loom" launch --nproc 2 --nnodes 2 --node-rank "$k" \
      --master-addr "$master" --master-port "$port" -- "$loom" train --config "$cfg" \
      --model.layers 4 --output.checkpoint_every 2 "$@" >"$tmp/$name.$k" 2>&1 &
    launchers+=($!)
  done
  wait_all
}
# errors NAME: the error lines of both hosts, and any launcher's line about a rank's exit (a
# rank that exits with 2 has said why: no launcher adds a line).
errors() { cat "$tmp/$1.0" "$tmp/$1.1" | grep -E "error:|^loom: rank"; }
# refused_once NAME LABEL PATTERN: run NAME exited 2 on both hosts with one such line, matching.
refused_once() {
  if [[ ${rcs[*]} == "2 2" && $(errors "$1" | wc -l) -eq 1 ]] && errors "$1" | grep -q "$3"; then
    ok "$2: $(errors "$1")"
  else
    cat "$tmp/$1.0" "$tmp/$1.1"; fail "$2 (exits ${rcs[*]})"
  fi
}

private first 29621 --pp 2 --dp 2 --output.dir "$tmp/run/out"
if [[ ${rcs[*]} == "0 0" && -f $tmp/h0/out/checkpoint/step-000004/manifest.json &&
      -f $tmp/h1/out/checkpoint/step-000004/rank-00002.pt &&
      ! -e $tmp/h1/out/checkpoint/step-000004/manifest.json ]] &&
   [[ $(grep -c "ranks 2-3 on $LOOM_HOSTS_PREFIX-h1 do not see the run folder" "$tmp/first.0") -eq 1 ]]; then
  ok "trains and saves on private folders, said once at the start: $(grep -o 'warning: .*' "$tmp/first.0")"
else
  cat "$tmp/first.0" "$tmp/first.1"; fail "first run (exits ${rcs[*]})"
fi

private resume 29622 --pp 2 --dp 2 --steps 6 --output.dir "$tmp/run/resumed" \
  --resume "$tmp/run/out/checkpoint"
refused_once resume "resume where host 1 lacks the manifests" \
  "ranks 2-3 on $LOOM_HOSTS_PREFIX-h1 cannot read the checkpoint .* that ranks 0-1 on $LOOM_HOSTS_PREFIX-h0 read: the hosts do not share this folder; resume from a folder that every host sees"

# Host 1 gets what rank 0 wrote (manifests, latest, config), not the rank files.
(cd "$tmp/h0" && find out/checkpoint -type f ! -name 'rank-*' -exec cp --parents {} "$tmp/h1" \;)
private same 29623 --pp 2 --dp 2 --steps 6 --output.dir "$tmp/run/same" \
  --resume "$tmp/run/out/checkpoint"
if [[ ${rcs[*]} == "0 0" ]] && ! errors same >/dev/null; then
  ok "the same layout resumes, each rank from its own file"
else
  cat "$tmp/same.0" "$tmp/same.1"; fail "same layout (exits ${rcs[*]})"
fi
private other 29624 --pp 1 --dp 4 --steps 6 --output.dir "$tmp/run/other" \
  --resume "$tmp/run/out/checkpoint"
refused_once other "another layout, rank files apart" \
  "checkpoint file '.*/rank-0000[23].pt' is not in the folder of rank 0 on $LOOM_HOSTS_PREFIX-h0, but other ranks see it: the hosts do not share this folder"

cp -rn "$tmp/h0/out/." "$tmp/h1/out/"
cp -rn "$tmp/h1/out/." "$tmp/h0/out/"
private gathered 29625 --pp 1 --dp 4 --steps 6 --output.dir "$tmp/run/gathered" \
  --resume "$tmp/run/out/checkpoint"
if [[ ${rcs[*]} == "0 0" ]] && grep -q '"step": 6' "$tmp/h0/gathered/metrics.jsonl"; then
  ok "every file on both hosts: the dp 4 resume trains to step 6"
else
  cat "$tmp/gathered.0" "$tmp/gathered.1"; fail "gathered (exits ${rcs[*]})"
fi
no_processes || fail "processes left on the hosts"

echo "$passes passed, $fails failed"
[[ $fails -eq 0 ]]
