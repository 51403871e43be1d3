#!/usr/bin/env bash
# loom's analytic model against published Megatron-LM throughput on A100-80GB (Selene): every
# row of Narayanan et al. 2021 Table 1 (the same rows as the Megatron-LM README's Selene table,
# 1.7B to 1T) and every row of its Table 2 (PTD-P and ZeRO-3). All: s = 2048, V = 51200, mixed
# precision as Megatron-LM keeps it, full activation recomputation (the paper's TFLOP/s count
# includes the recomputed forward, as `tflops_per_device` does), no sequence parallelism (it
# came later), pipeline messages and gradient reductions as Megatron-LM's 2021 code issued them
# (--blocking-p2p: batched exchanges waited for at both ends, the interleaved schedule's forward
# output sent after the backward that follows it; --grad-reduce-after-flush: the data-parallel
# all-reduce after the pipeline flush). Table 1 does not give the micro-batch size or the loops
# of its interleaved schedule: micro-batch 1 and the loops below are our choice; pp = 1 rows are
# 1f1b (nothing to interleave). Prints one markdown row per run, with the command that produced
# it.
# usage: bench/megatron_points.sh [BUILD=build]   CLUSTER=clusters/a100-80gb.toml
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
cluster=${CLUSTER:-clusters/a100-80gb.toml}
# table params layers hidden heads tp pp gpus batch micro-batch dp-mode loops published
rows="T1 1.7 24 2304 24 1 1 32 512 1 allreduce 1 137
T1 3.6 30 3072 32 2 1 64 512 1 allreduce 1 138
T1 7.5 36 4096 32 4 1 128 512 1 allreduce 1 142
T1 18.4 40 6144 48 8 1 256 1024 1 allreduce 1 135
T1 39.1 48 8192 64 8 2 512 1536 1 allreduce 2 138
T1 76.1 60 10240 80 8 4 1024 1792 1 allreduce 3 140
T1 145.6 80 12288 96 8 8 1536 2304 1 allreduce 2 148
T1 310.1 96 16384 128 8 16 1920 2160 1 allreduce 2 155
T1 529.6 105 20480 128 8 35 2520 2520 1 allreduce 3 163
T1 1008 128 25600 160 8 64 3072 3072 1 allreduce 2 163
T2 174.6 96 12288 96 8 12 384 1536 1 allreduce 2 153
T2 174.6 96 12288 96 8 12 768 1536 1 allreduce 2 149
T2 174.6 96 12288 96 8 12 1536 1536 1 allreduce 2 141
T2 529.6 105 20480 128 8 35 560 2240 1 allreduce 3 171
T2 529.6 105 20480 128 8 35 1120 2240 1 allreduce 3 167
T2 529.6 105 20480 128 8 35 2240 2240 1 allreduce 3 159
T2 174.6 96 12288 96 1 1 384 1536 4 zero3 1 144
T2 174.6 96 12288 96 1 1 768 1536 2 zero3 1 88
T2 174.6 96 12288 96 1 1 1536 1536 1 zero3 1 44
T2 529.6 105 20480 128 1 1 640 2560 4 zero3 1 138
T2 529.6 105 20480 128 1 1 1120 2240 2 zero3 1 98
T2 529.6 105 20480 128 1 1 2240 2240 1 zero3 1 48"
echo "| table | params (B) | GPUs | t | p | batch | b | dp-mode | published TFLOP/s | loom | err | fits | command |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
while read -r table params l h a tp pp gpus batch mb mode v pub; do
  sched=1f1b
  ((pp > 1)) && sched=interleaved
  cmd="loom simulate --model gpt --layers $l --width $h --heads $a --seq-len 2048 --vocab 51200 \
--cluster $cluster --gpus $gpus --pp $pp --tp $tp --global-batch $batch \
--micro-batch-size $mb --dp-mode $mode --schedule $sched --loops $v --recompute full --blocking-p2p \
--grad-reduce-after-flush \
--megatron --json"
  # shellcheck disable=SC2086
  out=$("$loom" ${cmd#loom })
  python3 - "$table" "$params" "$gpus" "$tp" "$pp" "$batch" "$mb" "$mode" "$pub" "$out" "$cmd" <<'PY'
import json, sys
table, params, gpus, tp, pp, batch, mb, mode, pub, out, cmd = sys.argv[1:12]
r, pub = json.loads(out), float(pub)
got = r["tflops_per_device"]
print(f"| {table} | {params} | {gpus} | {tp} | {pp} | {batch} | {mb} | {mode} | {pub:.0f} | {got:.0f} | "
      f"{100 * (got - pub) / pub:+.1f}% | {'yes' if r['fits'] else 'NO'} | `{cmd}` |")
PY
done <<<"$rows"
