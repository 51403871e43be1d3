#!/usr/bin/env bash
# Ranks that do not share the run folder, under mpiexec (the hosts' tests run loom launch over
# Gloo): each rank in mount and hostname namespaces of its own, so that it sees its own folder
# at the run's path and takes itself for a host of its own. A save at once and one in the
# background (whose copies run on the writer threads, over MPI beside the training's
# collectives) leave each "host" the manifest and both rank files, the same bytes. Needs root
# (unshare); says "skip" otherwise.
# usage: private_folders_mpi_test.sh LOOM_BINARY
set -u
loom=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source "$(dirname "$0")/check_lib.sh"

if ! unshare -u -m true 2>/dev/null; then
  echo "skip: cannot make mount and hostname namespaces here (needs root)"
  exit 0
fi
cfg="$tmp/tiny.toml"
cat "$(dirname "$0")/tiny_gpt.toml" - >"$cfg" <<'TOML'
[train]
steps = 4
global_batch = 8
microbatches = 2
optimizer = "adamw"
[output]
progress = false
checkpoint_every = 2
keep = 2
TOML
cat >"$tmp/rank.sh" <<'SH'
#!/bin/sh
# as "host" pfmK with folder $tmp/hK at $tmp/run (K: the MPI rank)
hostname "pfm$OMPI_COMM_WORLD_RANK" && mount --bind "$1/h$OMPI_COMM_WORLD_RANK" "$1/run" &&
  shift && exec "$@"
SH
chmod +x "$tmp/rank.sh"
crcs() { grep -o '"crc32": *[0-9]*' "$1/out/checkpoint/step-000002/manifest.json" | tr -d ' \n'; }

declare -A crc=()
for mode in false true; do
  rm -rf "$tmp/h0" "$tmp/h1" && mkdir -p "$tmp/h0" "$tmp/h1" "$tmp/run"
  timeout 180 mpiexec -n 2 --oversubscribe unshare -u -m --propagation private "$tmp/rank.sh" "$tmp" \
    "$loom" train --config "$cfg" --comm mpi --pp 2 --output.async_save "$mode" \
    --output.dir "$tmp/run/out" >"$tmp/stderr" 2>&1
  rc=$?
  files=$(compgen -G "$tmp/h[01]/out/checkpoint/step-00000[24]/rank-*.pt" | wc -l)
  if [[ $rc -eq 0 ]] && grep -q "ranks 1 on pfm1 do not see the run folder" "$tmp/stderr" &&
     [[ $files -eq 8 && -n $(crcs "$tmp/h0") && $(crcs "$tmp/h1") == "$(crcs "$tmp/h0")" ]]; then
    ok "async_save $mode: both rank files of steps 2 and 4 on both hosts, one manifest's CRC-32s"
    crc[$mode]=$(crcs "$tmp/h0")
  else
    fail "async_save $mode: exit $rc, $files rank files"
  fi
done
if [[ -n ${crc[false]:-} && ${crc[false]} == "${crc[true]:-}" ]]; then
  ok "the background save wrote the bytes of the one at once"
else
  fail "background and immediate saves differ: ${crc[false]:-none} / ${crc[true]:-none}"
fi
# shellcheck disable=SC2154 # passes and fails: check_lib.sh's
echo "private_folders_mpi_test: $passes passed, $fails failed"
[[ $fails -eq 0 ]]
