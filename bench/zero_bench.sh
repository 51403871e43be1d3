#!/usr/bin/env bash
# Sharded data parallelism inside pipelines (docs/zero.md; results in docs/notes/zero-results.md):
# the GPT of configs/gpt-fortunes.toml on 4 ranks, every schedule x dp-mode at equal configuration
# (same global batch, micro-batches, seed), for pp=2 x dp=2 and pp=1 x dp=4. Prints one markdown
# table per link: step time (median over the steps after the first), exposed and hidden
# data-parallel communication per step, DP bytes and collective calls per step (rank 0), peak memory
# per rank.
# usage: bench/zero_bench.sh [BUILD_DIR] [STEPS] [OUT_DIR] [LINK...]
#   LINK: "local" (this machine's shared memory) and/or a bandwidth such as 1Gbit: an EMULATED
#   link (loom delays every communication as such a link would; not a real network).
#   Default: local 100Mbit.
# dp-modes: allreduce, zero1, zero2, zero3 and zero3-keep (zero3 with
# parallel.reshard_after_forward = false: parameters stay gathered from forward to backward).
set -euo pipefail
build=${1:-build-zero}
steps=${2:-10}
out=${3:-runs/zero-bench}
shift $(( $# < 3 ? $# : 3 ))
links=("$@")
[[ ${#links[@]} -gt 0 ]] || links=(local 100Mbit)
modes=(allreduce zero1 zero2 zero3 zero3-keep)
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
common=(--config configs/gpt-fortunes.toml --nproc 4 --microbatches 4 --steps "$steps"
        --eval_batches 1 --seed 1234 --progress false)
mkdir -p "$out"
for link in "${links[@]}"; do
  extra=()
  [[ $link == local ]] || extra=(--emulate.bandwidth "$link")
  for pp in 2 1; do
    for sched in 1f1b interleaved bfs; do
      loops=2
      [[ $sched == 1f1b ]] && loops=1
      for mode in "${modes[@]}"; do
        name="$link-pp$pp-$sched-$mode"
        dir="$out/$name"
        rm -rf "$dir"
        flags=(--dp-mode "$mode")
        [[ $mode == zero3-keep ]] && flags=(--dp-mode zero3 --parallel.reshard_after_forward false)
        cmd=("$build/bin/loom" train "${common[@]}" --pp "$pp" --schedule "$sched" --loops "$loops"
             "${flags[@]}" "${extra[@]}" --output.dir "$dir" --overwrite)
        echo "+ ${cmd[*]}" >&2
        "${cmd[@]}" >"$dir.log" 2>&1 || { echo "run $name failed, see $dir.log" >&2; exit 1; }
      done
    done
  done
done
python3 - "$out" "${links[@]}" <<'EOF'
import json, os, statistics, sys
out, links = sys.argv[1], sys.argv[2:]
def mib(b): return f"{b / 2**20:.2f}"
for link in links:
    title = "this machine (shared memory)" if link == "local" else f"EMULATED {link}/s link"
    print(f"\n### {title}\n")
    print("| pp x dp | schedule | dp-mode | step ms | dp exposed ms/step | dp hidden ms/step "
          "| dp MiB/step (rank 0) | dp calls/step | params+grads+optim MiB/rank (max) "
          "| peak MiB/rank (max, with activations) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for pp in (2, 1):
        for sched in ("1f1b", "interleaved", "bfs"):
            for mode in ("allreduce", "zero1", "zero2", "zero3", "zero3-keep"):
                path = os.path.join(out, f"{link}-pp{pp}-{sched}-{mode}", "metrics.jsonl")
                rows = [json.loads(l) for l in open(path)]
                steps = [r for r in rows if "loss" in r and "step_s" in r]
                summ = [r for r in rows if r.get("summary") == "run"][-1]
                later = steps[1:] or steps
                step_ms = statistics.median(r["step_s"] for r in later) * 1e3
                exp_ms = statistics.mean(r["dp_exposed_s"] for r in later) * 1e3
                hid_ms = statistics.mean(r["dp_hidden_s"] for r in later) * 1e3
                n = summ["steps"]
                state = max(v for k, v in summ.items() if k.startswith("state_bytes_r"))
                peak = max(v for k, v in summ.items() if k.startswith("peak_bytes_r"))
                print(f"| {pp} x {4 // pp} | {sched} | {mode} | {step_ms:.0f} | {exp_ms:.1f} "
                      f"| {hid_ms:.1f} | {mib(summ['dp_bytes_per_step'])} "
                      f"| {summ['dp_calls_per_step']:.0f} | {mib(state)} | {mib(peak)} |")
EOF
