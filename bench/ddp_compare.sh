#!/usr/bin/env bash
# loom vs PyTorch DDP (gloo, CPU) on the same byte-level GPT: D=256, L=4, H=4, T=128,
# micro-batch 16 per rank, AdamW, one thread per rank, world 1 and 2.
# usage: bench/ddp_compare.sh [BUILD_DIR] [STEPS]      (needs Debian's python3-torch for the peer)
set -euo pipefail
build=${1:-build}
steps=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
peer=${LOOM_PEER_DIR:-$here/../../shared/bench/peers}
[[ -d $peer ]] || peer=$here/../shared/bench/peers
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

gflops=$("$build/bin/loom" doctor | awk '/matmul/ {print $3}')
# Training FLOPs per token (forward x3): L*(24*T*D^2 + 4*T^2*D) + 2*T*D*V per sample, / T.
flops_per_token=$(python3 -c "D,L,T,V=256,4,128,256; print(3*(L*(24*T*D*D+4*T*T*D)+2*T*D*V)/T)")

printf "%-6s %-8s %12s %10s %8s\n" world system tokens/s step_s MFU
for world in 1 2; do
  # loom: skip 3 warm-up steps like the peer, median step time of the rest.
  "$build/bin/loom" train --nproc "$world" --model.kind gpt --width 256 --layers 4 --heads 4 \
    --seq_len 128 --data.kind synthetic --global_batch $((16 * world)) --microbatches 1 \
    --optimizer adamw --lr 3e-4 --steps $((steps + 3)) --eval_batches 1 \
    --output.dir "$out/loom$world" --progress false >/dev/null 2>&1
  step_s=$(python3 - "$out/loom$world/metrics.jsonl" <<'PY'
import json, sys, statistics
rows = [r for r in map(json.loads, open(sys.argv[1])) if 'loss' in r and 'step_s' in r]
print(statistics.median(r["step_s"] for r in rows[3:]))
PY
)
  loom_tps=$(python3 -c "print(16*128*$world/$step_s)")
  mfu=$(python3 -c "print(f'{$loom_tps/$world*$flops_per_token/($gflops*1e9)*100:.1f}%')")
  printf "%-6s %-8s %12.0f %10.3f %8s\n" "$world" loom "$loom_tps" "$step_s" "$mfu"
  line=$(STEPS=$steps bash "$peer/ddp_gpt.sh" "$world" 2>/dev/null | grep tokens/s)
  peer_tps=$(sed -E 's/.*tokens\/s=([0-9.]+).*/\1/' <<<"$line")
  peer_step=$(sed -E 's/.*step_s=([0-9.]+).*/\1/' <<<"$line")
  mfu=$(python3 -c "print(f'{$peer_tps/$world*$flops_per_token/($gflops*1e9)*100:.1f}%')")
  printf "%-6s %-8s %12.0f %10.3f %8s\n" "$world" ddp "$peer_tps" "$peer_step" "$mfu"
  python3 -c "print(f'world {$world}: loom / ddp = {$loom_tps/$peer_tps:.2f}x')"
done
echo "single-core matmul rate (loom doctor, 512x512): $gflops GFLOP/s; training FLOPs/token: $flops_per_token"
