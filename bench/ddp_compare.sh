#!/usr/bin/env bash
# loom vs PyTorch DDP (gloo, CPU) on the same byte-level GPT: D=256, L=4, H=4, T=128,
# micro-batch 16 per rank, AdamW, one thread per rank, world 1 and 2.
# usage: bench/ddp_compare.sh [BUILD_DIR] [STEPS] [ROUNDS]   (the peer uses the torch wheel of scripts/install-deps.sh)
#
# A shared machine's speed drifts by tens of percent within minutes, so one run of each system
# compares the machine at two moments more than the two systems. The script therefore runs
# ROUNDS rounds, alternating which system goes first (ABBA), and reports per system the median
# tokens/s and per round the ratio of the two adjacent runs; the median of those ratios is the
# figure to quote. Both systems are timed the same way: mean step time over STEPS steps after 3
# warm-up steps (the peer's own measure; for loom the mean of its per-step wall times).
set -euo pipefail
build=${1:-build}
steps=${2:-20}
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
peer=${LOOM_PEER_DIR:-$here/../../shared/bench/peers}
[[ -d $peer ]] || peer=$here/../shared/bench/peers
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
runs=$out/runs.txt

run_loom() {  # world -> tokens/s
  local world=$1 dir=$out/loom
  rm -rf "$dir"
  "$build/bin/loom" train --nproc "$world" --model.kind gpt --width 256 --layers 4 --heads 4 \
    --seq_len 128 --data.kind synthetic --global_batch $((16 * world)) --microbatches 1 \
    --optimizer adamw --lr 3e-4 --steps $((steps + 3)) --eval_batches 1 \
    --output.dir "$dir" --progress false >/dev/null 2>&1
  python3 - "$dir/metrics.jsonl" "$world" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if 'loss' in r and 'step_s' in r]
dt = sum(r["step_s"] for r in rows[3:])
print(f"{16 * 128 * int(sys.argv[2]) * len(rows[3:]) / dt:.1f}")
PY
}

run_ddp() {  # world -> tokens/s
  STEPS=$steps bash "$peer/ddp_gpt.sh" "$1" 2>/dev/null | sed -nE 's/.*tokens\/s=([0-9.]+).*/\1/p'
}

# Same libtorch (and BLAS) for both: the peer runs on the torch wheel loom builds against.
export PYTHON=${PYTHON:-${LOOM_VENV:-$HOME/.local/share/loom/venv}/bin/python}
echo "peer python: $PYTHON"
gflops=()
echo "round world system tokens/s"
for ((r = 0; r < rounds; ++r)); do
  gflops+=("$("$build/bin/loom" doctor | awk '/matmul/ {print $3}')")
  for world in 1 2; do
    if ((r % 2 == 0)); then order="loom ddp"; else order="ddp loom"; fi
    for sys in $order; do
      tps=$("run_$sys" "$world")
      echo "$r $world $sys $tps" | tee -a "$runs"
    done
  done
done

python3 - "$runs" "${gflops[*]}" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
gf = st.median(float(g) for g in sys.argv[2].split())
# Training FLOPs per token (forward x3): L*(24*T*D^2 + 4*T^2*D) + 2*T*D*V per sample, / T.
D, L, T, V = 256, 4, 128, 256
fpt = 3 * (L * (24 * T * D * D + 4 * T * T * D) + 2 * T * D * V) / T
print(f"\nsingle-core 512x512 matmul rate (loom doctor, median of {len(sys.argv[2].split())}): "
      f"{gf:.1f} GFLOP/s; training FLOPs per token: {fpt / 1e6:.2f} M")
print(f"{'world':>5} {'loom tok/s':>11} {'ddp tok/s':>10} {'loom MFU':>9} {'ddp MFU':>8} "
      f"{'ratio per round':>22} {'median ratio':>13}")
for w in ("1", "2"):
    tps = {s: {int(r): float(t) for r, ww, ss, t in rows if ww == w and ss == s} for s in ("loom", "ddp")}
    ratios = [tps["loom"][r] / tps["ddp"][r] for r in sorted(tps["loom"]) if r in tps["ddp"]]
    lm, dm = st.median(tps["loom"].values()), st.median(tps["ddp"].values())
    mfu = lambda t: f"{t / int(w) * fpt / (gf * 1e9) * 100:.0f}%"
    print(f"{w:>5} {lm:>11.0f} {dm:>10.0f} {mfu(lm):>9} {mfu(dm):>8} "
          f"{' '.join(f'{x:.2f}' for x in ratios):>22} {st.median(ratios):>12.2f}x")
PY
