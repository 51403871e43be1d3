#!/usr/bin/env bash
# loom's analytic model against published Megatron-LM throughput on A100-80GB (Selene): every
# row of Narayanan et al. 2021 Table 1 (the same rows as the Megatron-LM README's Selene table,
# 1.7B to 1T) and every row of its Table 2 (PTD-P and ZeRO-3). All: s = 2048, V = 51200, fp16
# mixed precision as Megatron-LM keeps it (--megatron), full activation recomputation (the
# paper's TFLOP/s count includes the recomputed forward, as `tflops_per_device` does), no
# sequence parallelism (it came later), the head tied to the token embedding (Megatron-LM's GPT;
# on a pipeline the last stage keeps a copy whose gradient it all-reduces with the first's).
# Table 1's micro-batch sizes, virtual pipeline stages and data-parallel implementation are the
# paper's own reproduction script's (Megatron-LM examples/sc21/run_table_1.sh; its CONFIG.sh:
# --fp16, so gradients are reduced in fp16). DDP "local" rows reduce after the pipeline flush and
# exchange pipeline messages as Megatron-LM's 2021 code did (--grad-reduce-after-flush,
# --blocking-p2p); DDP "torch" rows (pp = 1) reduce when the backward is done. Table 2 has no
# script: its 530B rows take Table 1's 530B layout (1 layer per virtual stage), its 175B rows the
# layout of the paper's two 175B scripts (run_figure_12.sh, run_figure_18.sh: 2 layers per
# virtual stage); its ZeRO-3 rows are DeepSpeed's (no pipeline). Prints one markdown row per
# run, with the command that produced it.
# usage: bench/megatron_points.sh [BUILD=build]   CLUSTER=clusters/a100-80gb.toml
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
loom=$build/bin/loom
cluster=${CLUSTER:-clusters/a100-80gb.toml}
# table params layers hidden heads tp pp gpus batch micro-batch loops ddp published
rows="T1 1.7 24 2304 24 1 1 32 512 16 1 torch 137
T1 3.6 30 3072 32 2 1 64 512 16 1 torch 138
T1 7.5 36 4096 32 4 1 128 512 16 1 torch 142
T1 18.4 40 6144 48 8 1 256 1024 8 1 torch 135
T1 39.1 48 8192 64 8 2 512 1536 4 1 local 138
T1 76.1 60 10240 80 8 4 1024 1792 2 3 local 140
T1 145.6 80 12288 96 8 8 1536 2304 2 2 local 148
T1 310.1 96 16384 128 8 16 1920 2160 1 2 local 155
T1 529.6 105 20480 128 8 35 2520 2520 1 3 local 163
T1 1008 128 25600 160 8 64 3072 3072 1 1 local 163
T2 174.6 96 12288 96 8 12 384 1536 1 4 local 153
T2 174.6 96 12288 96 8 12 768 1536 1 4 local 149
T2 174.6 96 12288 96 8 12 1536 1536 1 4 local 141
T2 529.6 105 20480 128 8 35 560 2240 1 3 local 171
T2 529.6 105 20480 128 8 35 1120 2240 1 3 local 167
T2 529.6 105 20480 128 8 35 2240 2240 1 3 local 159
T2 174.6 96 12288 96 1 1 384 1536 4 1 zero3 144
T2 174.6 96 12288 96 1 1 768 1536 2 1 zero3 88
T2 174.6 96 12288 96 1 1 1536 1536 1 1 zero3 44
T2 529.6 105 20480 128 1 1 640 2560 4 1 zero3 138
T2 529.6 105 20480 128 1 1 1120 2240 2 1 zero3 98
T2 529.6 105 20480 128 1 1 2240 2240 1 1 zero3 48"
echo "| table | params (B) | GPUs | t | p | v | batch | b | data parallel | published TFLOP/s | loom | err | fits | command |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
while read -r table params l h a tp pp gpus batch mb v ddp pub; do
  sched=1f1b mode=allreduce megatron_2021=""
  ((v > 1)) && sched=interleaved
  [[ $ddp == zero3 ]] && mode=zero3
  [[ $ddp == local ]] && megatron_2021="--blocking-p2p --grad-reduce-after-flush "
  cmd="loom simulate --model gpt --layers $l --width $h --heads $a --seq-len 2048 --vocab 51200 \
--tie-embeddings \
--cluster $cluster --gpus $gpus --pp $pp --tp $tp --global-batch $batch \
--micro-batch-size $mb --dp-mode $mode --schedule $sched --loops $v --recompute full \
$megatron_2021--megatron --precision fp16 --json"
  # shellcheck disable=SC2086
  out=$("$loom" ${cmd#loom })
  python3 - "$table" "$params" "$gpus" "$tp" "$pp" "$v" "$batch" "$mb" "$ddp" "$pub" "$out" "$cmd" <<'PY'
import json, sys
table, params, gpus, tp, pp, v, batch, mb, ddp, pub, out, cmd = sys.argv[1:13]
r, pub = json.loads(out), float(pub)
got = r["tflops_per_device"]
print(f"| {table} | {params} | {gpus} | {tp} | {pp} | {v} | {batch} | {mb} | {ddp} | {pub:.0f} | {got:.0f} | "
      f"{100 * (got - pub) / pub:+.1f}% | {'yes' if r['fits'] else 'NO'} | `{cmd}` |")
PY
done <<<"$rows"
