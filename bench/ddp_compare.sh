#!/usr/bin/env bash
# loom vs PyTorch DDP (CPU) on the same byte-level GPT: D=256, L=4, H=4, T=128, micro-batch 16
# per rank, AdamW, one thread per rank, world 1 and 2. loom runs with --comm mpi (launched by
# mpirun) and with --comm gloo (its own launcher); the peer (bench/peers/ddp_gpt.py) is DDP with
# the gloo backend under torchrun, on the same torch wheel loom is built against.
# usage: bench/ddp_compare.sh [BUILD_DIR] [STEPS] [ROUNDS]
#
# A shared machine's speed drifts by tens of percent within minutes, so one run of each system
# compares the machine at two moments more than the systems. The script therefore runs ROUNDS
# rounds, rotating which system goes first, and reports per system the median tokens/s and per
# round the ratio of loom's run to the peer's run of that round; the median of those ratios is
# the figure to quote. Both are timed the same way: mean step time over STEPS steps after 3
# warm-up steps (the peer's own measure; for loom the mean of its per-step wall times).
set -euo pipefail
build=${1:-build}
steps=${2:-20}
rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
venv=${LOOM_VENV:-$HOME/.local/share/loom/venv}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
runs=$out/runs.txt

run_loom() {  # world comm -> tokens/s
  local world=$1 comm=$2 dir=$out/loom
  rm -rf "$dir"
  "$build/bin/loom" train --nproc "$world" --comm "$comm" --model.kind gpt --width 256 --layers 4 --heads 4 \
    --seq_len 128 --data.kind synthetic --global_batch $((16 * world)) --microbatches 1 \
    --optimizer adamw --lr 3e-4 --steps $((steps + 3)) --eval_batches 1 \
    --output.dir "$dir" --overwrite --progress false >/dev/null 2>&1
  python3 - "$dir/metrics.jsonl" "$world" <<'PY'
import json, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if 'loss' in r and 'step_s' in r]
dt = sum(r["step_s"] for r in rows[3:])
print(f"{16 * 128 * int(sys.argv[2]) * len(rows[3:]) / dt:.1f}")
PY
}

run_loom-mpi() { run_loom "$1" mpi; }
run_loom-gloo() { run_loom "$1" gloo; }

run_ddp() {  # world -> tokens/s
  "$venv/bin/torchrun" --nproc-per-node "$1" "$here/peers/ddp_gpt.py" --steps "$steps" 2>/dev/null |
    sed -nE 's/.*tokens\/s=([0-9.]+).*/\1/p'
}

echo "peer: $venv/bin/torchrun (torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null))"
systems=(loom-mpi loom-gloo ddp)
gflops=()
echo "round world system tokens/s"
for ((r = 0; r < rounds; ++r)); do
  gflops+=("$("$build/bin/loom" doctor | awk '/matmul/ {print $3}')")
  for world in 1 2; do
    order=()  # rotate the order from round to round
    for ((k = 0; k < ${#systems[@]}; ++k)); do order+=("${systems[(k + r) % ${#systems[@]}]}"); done
    for sys in "${order[@]}"; do
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
print(f"{'world':>5} {'system':>10} {'tok/s':>8} {'MFU':>5} {'ratio to ddp per round':>24} {'median':>7}")
for w in ("1", "2"):
    tps = {s: {int(r): float(t) for r, ww, ss, t in rows if ww == w and ss == s}
           for s in ("loom-mpi", "loom-gloo", "ddp")}
    for s in ("loom-mpi", "loom-gloo", "ddp"):
        med = st.median(tps[s].values())
        mfu = f"{med / int(w) * fpt / (gf * 1e9) * 100:.0f}%"
        ratios = [tps[s][r] / tps["ddp"][r] for r in sorted(tps[s]) if r in tps["ddp"]]
        rs = " ".join(f"{x:.2f}" for x in ratios) if s != "ddp" else ""
        mr = f"{st.median(ratios):.2f}x" if s != "ddp" else ""
        print(f"{w:>5} {s:>10} {med:>8.0f} {mfu:>5} {rs:>24} {mr:>7}")
PY
