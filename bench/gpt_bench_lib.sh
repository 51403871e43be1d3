# shellcheck shell=bash disable=SC2034 # its variables are for the scripts that source it
# Sourced by the benchmarks that run the GPT of bench/gpt_checkpoints.toml on local ranks:
# `source "$(dirname "$0")/gpt_bench_lib.sh" ROUNDS_DEFAULT "$@"`, the script's arguments being
# [BUILD_DIR] [RANKS] [ROUNDS]. Moves to the repository root and sets $build, $ranks, $rounds,
# $loom, $cfg and $tmp (removed when the script exits); one thread a rank.
set -euo pipefail
build=${2:-build} ranks=${3:-2} rounds=${4:-$1}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
loom=$PWD/$build/bin/loom cfg=$PWD/bench/gpt_checkpoints.toml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
