#!/usr/bin/env bash
# loom vs PyTorch 2.11's own pipelines and sharding (torch.distributed.pipelining, FSDP2), DDP
# and DeepSpeed's PipelineEngine, on CPU, on the same byte-level GPT: D=256, L=4, H=4, T=128,
# vocabulary 256, AdamW lr 3e-4 (no weight decay), synthetic random bytes, one thread per rank.
# usage: bench/peers_compare.sh [BUILD_DIR] [STEPS] [ROUNDS]
#        ONLY="gpipe 1f1b" bench/peers_compare.sh ...   (only the configurations named)
#        LOOM_EXTRA="--cpu_gemm blas" bench/peers_compare.sh ...   (flags added to every loom
#        run; this one gives loom the peers' MKL products instead of oneDNN's)
#
# Configurations (one group each; loom and its peers of the group run in a rotated order every
# round, ABBA as bench/ddp_compare.sh does):
#   world 2, pp 2, global batch 32 in 8 micro-batches of 4: loom's gpipe, 1f1b, interleaved
#     (loops 2), bfs (loops 2) and zb-h1 against ScheduleGPipe, Schedule1F1B (and DeepSpeed's
#     PipelineEngine), ScheduleInterleaved1F1B, ScheduleLoopedBFS, ScheduleInterleavedZeroBubble
#     (2 stages per rank, and 1 as zb-h1 has); loom's zbv and dualpipev (V placement, 2 stages per
#     rank) against ScheduleZBVZeroBubble and ScheduleDualPipeV;
#   world 2, dp 2, 16 samples per rank: loom allreduce / zero3 / zero2 against DDP / FSDP2 /
#     FSDP2 with reshard_after_forward=False;
#   world 4, pp 2 x dp 2, global batch 64 in 8 micro-batches of 4 per replica: loom bfs (loops
#     2) + zero3 against ScheduleLoopedBFS + FSDP2 on a 2-D DeviceMesh.
# Every system is launched by the venv's torchrun (loom with --no-python, --comm gloo), each
# rank through bench/peers/maxrss.py or reporting itself (bench/peers/common.py), so that both
# sides have the same measures: tokens/s = tokens per step / median step time over STEPS steps
# after 3 warm-up steps (loom's per-step wall times from metrics.jsonl), and peak memory per
# rank = the rank process's maximum resident set size (getrusage ru_maxrss; loom's includes
# its final evaluation and checkpoint, the peers' ends with the last step).
# Per configuration: the median of the per-round ratios loom / peer of tokens/s and of peak RSS.
set -euo pipefail
build=${1:-build}
steps=${2:-10}
rounds=${3:-3}
warmup=3
here=$(cd "$(dirname "$0")" && pwd)
peers=$here/peers
venv=${LOOM_VENV:-$HOME/.local/share/loom/venv}
loom=$(cd "$build" && pwd)/bin/loom
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 DS_ACCELERATOR=cpu
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
runs=$out/runs.txt

if ! "$venv/bin/python" -c 'import deepspeed' 2>/dev/null; then
  echo "[peers] installing deepspeed into $venv (DS_BUILD_OPS=0)"
  DS_BUILD_OPS=0 "$venv/bin/python" -m pip install -q deepspeed >/dev/null 2>&1 ||
    echo "[peers] deepspeed did not install: its rows are skipped"
fi
have_ds=$("$venv/bin/python" -c 'import deepspeed; print(1)' 2>/dev/null || echo 0)

# name world "loom flags" | "peer script and flags" ... (peers after the bar)
groups=(
  "gpipe 2 --pp 2 --schedule gpipe --global_batch 32 --microbatches 8 | pp_gpt.py --schedule gpipe --micro-batch 4 --microbatches 8"
  "1f1b 2 --pp 2 --schedule 1f1b --global_batch 32 --microbatches 8 | pp_gpt.py --schedule 1f1b --micro-batch 4 --microbatches 8 | ds_pipe_gpt.py --micro-batch 4 --microbatches 8"
  "interleaved 2 --pp 2 --loops 2 --schedule interleaved --global_batch 32 --microbatches 8 | pp_gpt.py --schedule interleaved --micro-batch 4 --microbatches 8"
  "bfs 2 --pp 2 --loops 2 --schedule bfs --global_batch 32 --microbatches 8 | pp_gpt.py --schedule bfs --micro-batch 4 --microbatches 8"
  "zb 2 --pp 2 --schedule zb-h1 --global_batch 32 --microbatches 8 | pp_gpt.py --schedule zb --micro-batch 4 --microbatches 8 | pp_gpt.py --schedule zb --stages-per-rank 1 --micro-batch 4 --microbatches 8"
  "zbv 2 --pp 2 --loops 2 --schedule zbv --global_batch 32 --microbatches 8 | pp_gpt.py --schedule zbv --micro-batch 4 --microbatches 8"
  "dualpipev 2 --pp 2 --loops 2 --schedule dualpipev --global_batch 32 --microbatches 8 | pp_gpt.py --schedule dualpipev --micro-batch 4 --microbatches 8"
  "allreduce 2 --dp_mode allreduce --global_batch 32 --microbatches 1 | ddp_gpt.py --micro-batch 16"
  "zero3 2 --dp_mode zero3 --global_batch 32 --microbatches 1 | fsdp_gpt.py --zero 3 --micro-batch 16"
  "zero2 2 --dp_mode zero2 --global_batch 32 --microbatches 1 | fsdp_gpt.py --zero 2 --micro-batch 16"
  "bfs+zero3 4 --pp 2 --loops 2 --schedule bfs --dp_mode zero3 --global_batch 64 --microbatches 8 | pp_gpt.py --schedule bfs --dp 2 --zero 3 --micro-batch 4 --microbatches 8"
)

torchrun() { "$venv/bin/torchrun" --standalone --nproc-per-node "$@"; }

run_loom() {  # world flags... -> "tokens/s peak_rss_mib rss_per_rank"
  local world=$1 dir=$out/loom
  shift
  rm -rf "$dir" "$out"/rss.*
  # shellcheck disable=SC2086 # LOOM_EXTRA: one flag or value a word
  torchrun "$world" --no-python python3 "$peers/maxrss.py" "$out" \
    "$loom" train --comm gloo --model.kind gpt --width 256 --layers 4 --heads 4 --seq_len 128 \
    --data.kind synthetic --data.synthetic_size 1024 --optimizer adamw --lr 3e-4 \
    --lr_schedule constant --steps $((steps + warmup)) --eval_batches 1 "$@" ${LOOM_EXTRA:-} \
    --output.dir "$dir" --overwrite --progress false >"$out/loom.log" 2>&1 || {
    echo "- - loom-failed"
    return
  }
  python3 - "$dir/metrics.jsonl" "$warmup" "$out" "$world" "$@" <<'PY'
import json, statistics, sys
path, warmup, out, world, flags = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5:]
gb = int(flags[flags.index("--global_batch") + 1])
rows = [r for r in map(json.loads, open(path)) if "loss" in r and "step_s" in r][warmup:]
rss = [int(open(f"{out}/rss.{r}").read()) for r in range(world)]
print(f"{gb * 128 / statistics.median(r['step_s'] for r in rows):.1f} {max(rss)} "
      + ",".join(map(str, rss)))
PY
}

run_peer() {  # world script flags... -> "tokens/s peak_rss_mib rss_per_rank"
  local world=$1 script=$2
  shift 2
  local line
  line=$(torchrun "$world" "$peers/$script" "$@" --steps "$steps" --warmup "$warmup" \
    2>"$out/peer.log" | grep 'tokens/s=' || true)
  if [[ -z $line ]]; then
    echo "- - failed:$(grep -m1 -oE '[A-Za-z.]*(Error|Exception)[^|]{0,80}' "$out/peer.log" | tr ' ' '_' || true)"
    return
  fi
  sed -nE 's/.*tokens\/s=([0-9.]+) peak_rss_mib=([0-9]+) rss_mib_per_rank=([0-9,]+).*/\1 \2 \3/p' <<<"$line"
}

echo "loom: $loom ($("$loom" --version | head -1)); peers: torch $("$venv/bin/python" -c \
  'import torch; print(torch.__version__)'), deepspeed $("$venv/bin/python" -c \
  'import deepspeed; print(deepspeed.__version__)' 2>/dev/null || echo none)"
echo "steps $steps after $warmup warm-up, rounds $rounds; load: $(uptime | sed 's/.*load/load/')"
echo "round config system tokens/s peak_rss_mib rss_mib_per_rank"
for ((r = 0; r < rounds; ++r)); do
  echo "round $r: $(date -u +%H:%M) $(uptime | sed 's/.*load/load/')"
  for g in "${groups[@]}"; do
    IFS='|' read -ra parts <<<"$g"
    read -r name world loom_flags <<<"${parts[0]}"
    [[ -n ${ONLY:-} && " $ONLY " != *" $name "* ]] && continue
    systems=()
    [[ $loom_flags != - ]] && systems+=("loom")
    for ((k = 1; k < ${#parts[@]}; ++k)); do systems+=("$k"); done
    n=${#systems[@]}
    for ((k = 0; k < n; ++k)); do  # rotate the order from round to round
      sys=${systems[(k + r) % n]}
      if [[ $sys == loom ]]; then
        label=loom
        # shellcheck disable=SC2086
        res=$(run_loom "$world" $loom_flags)
      else
        read -ra peer <<<"${parts[sys]}"
        label=${peer[0]%_gpt.py}  # ddp, fsdp; torch-SCHEDULE (-1stage); deepspeed
        [[ $label == fsdp ]] && label=fsdp2-zero${peer[2]}
        [[ $label == pp ]] && label=torch-${peer[2]}
        [[ ${peer[3]:-} == --stages-per-rank ]] && label+=-${peer[4]}stage
        [[ $label == ds_pipe ]] && label=deepspeed
        if [[ $label == deepspeed && $have_ds != 1 ]]; then
          res="- - not-installed"
        else
          res=$(run_peer "$world" "${peer[@]}")
        fi
      fi
      echo "$r $name $label $res" | tee -a "$runs"
    done
  done
done

echo "end: $(date -u +%H:%M) $(uptime | sed 's/.*load/load/')"
python3 - "$runs" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
num = lambda x: float(x) if x not in ("-",) else None
print("\nratio = loom / peer in the same round; tokens/s and peak RSS: medians over rounds")
print(f"{'config':>11} {'peer':>17} {'loom tok/s':>10} {'peer tok/s':>10} {'ratios per round':>18} "
      f"{'median':>7} {'loom MiB':>8} {'peer MiB':>8} {'mem ratio':>9}")
for name in dict.fromkeys(r[1] for r in rows):
    g = [r for r in rows if r[1] == name]
    loom = {int(r[0]): r for r in g if r[2] == "loom"}
    for peer in dict.fromkeys(r[2] for r in g if r[2] != "loom"):
        p = {int(r[0]): r for r in g if r[2] == peer}
        ok = lambda d: {k: v for k, v in d.items() if num(v[3]) is not None}
        lo, po = ok(loom), ok(p)
        med = lambda d, i: f"{st.median(float(v[i]) for v in d.values()):.0f}" if d else "-"
        both = sorted(set(lo) & set(po))
        ratios = [float(lo[k][3]) / float(po[k][3]) for k in both]
        mems = [float(lo[k][4]) / float(po[k][4]) for k in both]
        why = "" if po else " ".join(sorted({v[5] if len(v) > 5 else "" for v in p.values()}))
        print(f"{name:>11} {peer:>17} {med(lo, 3) if loom else 'not yet':>10} {med(po, 3):>10} "
              f"{' '.join(f'{x:.2f}' for x in ratios):>18} "
              f"{(f'{st.median(ratios):.2f}x' if ratios else '-'):>7} {med(lo, 4) if loom else '-':>8} "
              f"{med(po, 4):>8} {(f'{st.median(mems):.2f}' if mems else '-'):>9} {why}")
PY
