#!/usr/bin/env bash
# Everything a lent GPU machine is asked for, in one call of the device tool (docs/gpu.md):
#   make gpu-bundle            (here: gpu-bundle/ with a loom binary built without MPI)
#   run(command="bash bench/gpu_session.sh", carry=["gpu-bundle"], timeout_s=480)
# 1. bench/gpu_check.sh (the GPU check: throughput beside eager PyTorch, the profile and the
#    prediction from it, equivalence), at most CHECK_S seconds (default 280);
# 2. zb-h1 against 1f1b on deep pipelines on the machine's 16 cores (CPU, Gloo), where m = 2p
#    (pp 4, m 8; pp 8, m 16) and m = p (pp 8, m 8), at most SCHEDULES_S seconds (default 150);
#    SHAPES="PP LAYERS M;..." picks others.
# The results come back in $OUT (at most 8 files): gpu_check.txt, schedules.txt, the measured
# cluster file, the profile's and the runs' logs (logs.tar.gz).
set -uo pipefail
cd "$(dirname "$0")/.."
final=${OUT:-runs/gpu-session}
work=runs/gpu-check
mkdir -p "$final"
start=$SECONDS
{
  date -u "+%Y-%m-%d %H:%M UTC"
  grep -h PRETTY_NAME /etc/os-release 2>/dev/null
  echo "cores: $(nproc)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
} | tee "$final/machine.txt"

OUT=$work timeout -k 10 "${CHECK_S:-280}" bash bench/gpu_check.sh
echo "gpu_check: exit $? after $((SECONDS - start)) s"

loom=$(cat "$work/loom_path" 2>/dev/null || true)
if [ -n "$loom" ] && [ -x "$loom" ]; then
  LD_LIBRARY_PATH=$(cat "$work/library_path")
  export LD_LIBRARY_PATH
  build=$(dirname "$(dirname "$loom")")
  data=()
  [ -d gpu-bundle/fortunes ] && data=(DATA=gpu-bundle/fortunes)
  deadline=$((SECONDS + ${SCHEDULES_S:-150}))
  : >"$final/schedules.txt"
  IFS=';' read -ra shapes <<<"${SHAPES:-4 8 8;8 16 16;8 16 8}"
  for shape in "${shapes[@]}"; do
    read -r pp layers m <<<"$shape"
    left=$((deadline - SECONDS))
    [ "$left" -gt 10 ] || { echo "== pp $pp, m $m: no time left" | tee -a "$final/schedules.txt"; continue; }
    echo "== pp $pp, layers $layers, m $m (global batch 32)" | tee -a "$final/schedules.txt"
    env "${data[@]}" PP=$pp LAYERS=$layers MICROBATCHES=$m timeout -k 5 "$left" \
      bash bench/schedule_ab.sh "$build" 3 40 1f1b zb-h1 2>&1 | tee -a "$final/schedules.txt"
  done
  echo "schedules: $((SECONDS - start)) s in all"
fi

for f in gpu_check.txt h200-measured.toml profile.txt; do
  [ -f "$work/$f" ] && cp "$work/$f" "$final/"
done
tar -czf "$final/logs.tar.gz" --exclude='checkpoint' --exclude='params' --exclude='*.svg' \
  -C "$(dirname "$work")" "$(basename "$work")" 2>/dev/null
ls -la "$final"
