#!/usr/bin/env bash
# make bench: every benchmark in bench/, one after the other (they print figures; not tests).
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/.." || exit 1
echo "== $build/bin/cpu_gemm"
"$build/bin/cpu_gemm" || echo "(cpu_gemm failed)"
for b in bench/ddp_compare.sh bench/schedules.sh bench/zero_bench.sh bench/slim_fashion.sh bench/predict_vs_measure.sh bench/tp_compare.sh \
         bench/light_dp.sh bench/schedule_ab.sh bench/time_sharing_ab.sh bench/tied_ab.sh \
         bench/host_copies.sh bench/async_save.sh bench/resume_memory.sh bench/resume_reads.sh; do
  [[ -x $b ]] || continue
  echo "== $b"
  bash "$b" "$build" || echo "($b failed)"
done
echo "== $build/bin/fetch_copies"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec -n 2 --oversubscribe \
  "$build/bin/fetch_copies" || echo "(fetch_copies failed)"
echo "== bench/megatron_points.sh"
bash bench/megatron_points.sh "$build" || echo "(bench/megatron_points.sh failed)"
echo "== bench/megatron_step_split.py"
python3 bench/megatron_step_split.py "$build" || echo "(bench/megatron_step_split.py failed)"
