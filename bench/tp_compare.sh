#!/usr/bin/env bash
# The third dimension on this machine: the same GPT (configs/gpt-fortunes.toml) on 2 ranks as
# tp=2, dp=2 and pp=2 (1f1b), measured beside `loom simulate`'s prediction of each, both from
# the profile and with the machine's speed measured during each run (the calibration samples
# of bench/predict_vs_measure.sh, which this runs with these three configurations; this VM
# drifts by +-20% within minutes, so only the in-run prediction is a fair comparison).
# usage: bench/tp_compare.sh [BUILD=build] [STEPS=30]   ROUNDS=n (default 2)
#   PROFILE=once|each|0 as in predict_vs_measure.sh (default once).
set -euo pipefail
build=${1:-build}
steps=${2:-30}
cd "$(dirname "$0")/.."
CONFIGS="1 1 1f1b allreduce 2;1 2 1f1b allreduce;2 1 1f1b allreduce" ROUNDS=${ROUNDS:-2} \
  PROFILE=${PROFILE:-once} exec bash bench/predict_vs_measure.sh "$build" "$steps"
