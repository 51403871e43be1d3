# shellcheck shell=bash
# Sourced by the benchmarks that run on the namespace test bed (scripts/hosts.sh), from the
# repository root: `source bench/bed_lib.sh BUILD_DIR PREFIX RATE [HOSTS]` makes a bed of HOSTS
# hosts (default 2) under PREFIX (so that it never touches another bed), their links shaped to
# RATE unless it is "none", and sets $hosts, $loom, $master and $tmp (removed, with the bed, when
# the script exits).
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 LOOM_HOSTS_PREFIX=$2
hosts=scripts/hosts.sh
# shellcheck disable=SC2034 # used by the scripts that source this
loom=$PWD/$1/bin/loom master=10.77.0.10
tmp=$(mktemp -d)
trap 'bash "$hosts" down; rm -rf "$tmp"' EXIT
if [[ $3 == none ]]; then
  bash "$hosts" up "${4:-2}" >&2
else
  bash "$hosts" up "${4:-2}" --rate "$3" >&2
fi

# on_host K FOLDER CMD...: CMD on host K; with a FOLDER (not ""), host K sees it at $tmp/run,
# a run folder of its own (a bind mount in a mount namespace of its own, as a node-local disk).
on_host() {
  local k=$1 folder=$2
  shift 2
  if [[ -z $folder ]]; then
    bash "$hosts" exec "$k" "$@"
    return
  fi
  # shellcheck disable=SC2016 # $1, $2 and $@ are the inner shell's
  bash "$hosts" exec "$k" unshare -m --propagation private sh -c \
    'mount --bind "$1" "$2" && shift 2 && exec "$@"' _ "$folder" "$tmp/run" "$@"
}
